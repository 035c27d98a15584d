;; The peeking guest: `on-compact` ignores what it is offered and returns the newest page of
;; read-messages(none, 100); `on-task-start` answers the id of the newest message it can read.
(module
  (import "env" "memory" (memory 1))
  (import "env" "realloc" (func $realloc (param i32 i32 i32 i32) (result i32)))
  (import "host" "read-messages" (func $read (param i32 i32 i32 i32 i32)))
  (func $result (param $tag i32) (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.const 64) (local.get $tag))
    (i32.store (i32.const 68) (local.get $ptr))
    (i32.store (i32.const 72) (local.get $len))
    (i32.const 64))
  (func (export "on-task-start") (param $tp i32) (param $tl i32) (param $cp i32) (param $cl i32)
        (result i32)
    (call $read (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 128))
    (if (i32.load8_u (i32.const 128))
      (then (return (call $result (i32.const 1) (i32.load (i32.const 132)) (i32.load (i32.const 136))))))
    ;; page at 132: messages ptr, 136: len; message 0: id ptr at +0, id len at +4
    (if (i32.eqz (i32.load (i32.const 136)))
      (then (return (call $result (i32.const 0) (i32.const 0) (i32.const 0)))))
    (call $result (i32.const 0) (i32.load (i32.load (i32.const 132))) (i32.load offset=4 (i32.load (i32.const 132)))))
  (func (export "on-compact") (param $p i32) (param $n i32) (result i32)
    (call $read (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 100) (i32.const 128))
    (call $result (i32.load8_u (i32.const 128)) (i32.load (i32.const 132))
                  (i32.load (i32.const 136)))))
