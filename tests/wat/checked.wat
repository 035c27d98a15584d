;; The hook the hook checker is tested on, with at most one seeded fault (`@FAULT@`).
;; Spliced into component.wat like guest.wat, plus an import of wasi:random's get-random-u64
;; as "host" "random" (see tests/test_check_hook.py). Without a fault it is a correct hook:
;; `on-task-start` reads the newest page and answers ok("read ok"), or passes the read's
;; error on as err; `on-compact` keeps every message it is given.
;; Faults: 1 `on-compact` traps on an empty list; 2 `on-compact` on 10,000 messages or more
;; grows memory until the store refuses, then answers err("out of memory"); 3 `on-compact`
;; blanks the first message's id; 4 `on-task-start` answers 16 random hex digits;
;; 5 `on-task-start` traps when read-messages fails (as on not-granted).
(module
  (import "env" "memory" (memory 1))
  (import "env" "realloc" (func $realloc (param i32 i32 i32 i32) (result i32)))
  (import "host" "read-messages" (func $read (param i32 i32 i32 i32 i32)))
  (import "host" "random" (func $random (result i64)))
  (global $fault i32 (i32.const @FAULT@))
  (data (i32.const 16) "read ok")
  (data (i32.const 32) "out of memory")

  (func $result (param $tag i32) (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.const 64) (local.get $tag))
    (i32.store (i32.const 68) (local.get $ptr))
    (i32.store (i32.const 72) (local.get $len))
    (i32.const 64))

  ;; 16 lowercase hex digits of a random u64 at 200
  (func $random-hex (result i32)
    (local $x i64) (local $i i32) (local $d i32)
    (local.set $x (call $random))
    (loop $next
      (local.set $d (i32.wrap_i64 (i64.and (local.get $x) (i64.const 15))))
      (i32.store8 (i32.add (i32.const 200) (local.get $i))
        (i32.add (local.get $d)
                 (select (i32.const 48) (i32.const 87) (i32.lt_u (local.get $d) (i32.const 10)))))
      (local.set $x (i64.shr_u (local.get $x) (i64.const 4)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $next (i32.lt_u (local.get $i) (i32.const 16))))
    (call $result (i32.const 0) (i32.const 200) (i32.const 16)))

  (func (export "on-task-start") (param i32 i32 i32 i32) (result i32)
    (call $read (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 100) (i32.const 128))
    (if (i32.load8_u (i32.const 128))
      (then
        (if (i32.eq (global.get $fault) (i32.const 5)) (then unreachable))
        (return (call $result (i32.const 1) (i32.load (i32.const 132))
                              (i32.load (i32.const 136))))))
    (if (i32.eq (global.get $fault) (i32.const 4)) (then (return (call $random-hex))))
    (call $result (i32.const 0) (i32.const 16) (i32.const 7)))

  (func (export "on-compact") (param $p i32) (param $n i32) (result i32)
    (if (i32.and (i32.eq (global.get $fault) (i32.const 1)) (i32.eqz (local.get $n)))
      (then unreachable))
    (if (i32.and (i32.eq (global.get $fault) (i32.const 2))
                 (i32.ge_u (local.get $n) (i32.const 10000)))
      (then (loop $more
              (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
            (return (call $result (i32.const 1) (i32.const 32) (i32.const 13)))))
    (if (i32.and (i32.eq (global.get $fault) (i32.const 3)) (local.get $n))
      (then (i32.store offset=4 (local.get $p) (i32.const 0))))
    (call $result (i32.const 0) (local.get $p) (local.get $n))))
