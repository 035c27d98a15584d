;; The remembering guest: each call counts itself in a mutable global and in byte 256 of its
;; linear memory, and answers what it found there before counting: "seen <global>/<byte>".
;; A task id starting with "!" counts twice in one call (answering "seen 1/1" on a fresh
;; instance), which shows the guest does keep state within an instance. `on-compact` returns
;; its messages when it found nothing, else err("seen <global>/<byte>").
(module
  (import "env" "memory" (memory 1))
  (import "env" "realloc" (func $realloc (param i32 i32 i32 i32) (result i32)))
  (import "host" "read-messages" (func $read (param i32 i32 i32 i32 i32)))
  (global $calls (mut i32) (i32.const 0))
  (data (i32.const 128) "seen ?/?")

  (func $result (param $tag i32) (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.const 64) (local.get $tag))
    (i32.store (i32.const 68) (local.get $ptr))
    (i32.store (i32.const 72) (local.get $len))
    (i32.const 64))

  ;; writes what it finds into "seen ?/?", counts once more in both places, returns the
  ;; global's count
  (func $remember (result i32)
    (local $seen i32)
    (local.set $seen (global.get $calls))
    (i32.store8 (i32.const 133) (i32.add (i32.const 48) (local.get $seen)))
    (i32.store8 (i32.const 135) (i32.add (i32.const 48) (i32.load8_u (i32.const 256))))
    (global.set $calls (i32.add (local.get $seen) (i32.const 1)))
    (i32.store8 (i32.const 256) (i32.add (i32.load8_u (i32.const 256)) (i32.const 1)))
    (local.get $seen))

  (func (export "on-task-start") (param $tp i32) (param $tl i32) (param $cp i32) (param $cl i32)
        (result i32)
    (drop (call $remember))
    (if (i32.and (i32.ne (local.get $tl) (i32.const 0))
                 (i32.eq (i32.load8_u (local.get $tp)) (i32.const 33)))
      (then (drop (call $remember))))
    (call $result (i32.const 0) (i32.const 128) (i32.const 8)))

  (func (export "on-compact") (param $p i32) (param $n i32) (result i32)
    (if (call $remember)
      (then (return (call $result (i32.const 1) (i32.const 128) (i32.const 8)))))
    (call $result (i32.const 0) (local.get $p) (local.get $n))))
