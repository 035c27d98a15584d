;; A hook component that waits through WASI: it subscribes to a monotonic-clock pollable and
;; waits on it. `on-task-start` looks at the first byte of the task id:
;;   "p..." waits 10 s with `poll([pollable])`, "b..." waits 10 s with `pollable.block`,
;;   "q..." waits 20 ms with `poll` and returns ok("slept"); anything else returns ok("awake").
(component
  (type $lifecycle (instance
    (type $ev (record (field "task-id" string) (field "context-id" string)))
    (export "task-start-event" (type (eq $ev)))))
  (import "murmur:hook/lifecycle@0.8.0" (instance $lc (type $lifecycle)))
  (alias export $lc "task-start-event" (type $task-start-event))

  (import "wasi:io/poll@0.2.0" (instance $poll
    (export "pollable" (type (sub resource)))
    (export "[method]pollable.block" (func (param "self" (borrow 0))))
    (type $list (list (borrow 0)))
    (type $ready (list u32))
    (export "poll" (func (param "in" $list) (result $ready)))))
  (alias export $poll "pollable" (type $pollable))
  (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock
    (alias outer 1 $pollable (type $p))
    (export "pollable" (type (eq $p)))
    (export "subscribe-duration" (func (param "when" u64) (result (own $p))))))

  (core module $mem
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 4096))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $ptr i32)
      (local.set $ptr (i32.and (i32.add (global.get $next) (i32.const 7)) (i32.const -8)))
      (global.set $next (i32.add (local.get $ptr) (local.get 3)))
      (local.get $ptr)))
  (core instance $mem-i (instantiate $mem))
  (alias core export $mem-i "memory" (core memory $memory))
  (alias core export $mem-i "realloc" (core func $realloc))

  (alias export $clock "subscribe-duration" (func $subscribe))
  (alias export $poll "poll" (func $poll-fn))
  (alias export $poll "[method]pollable.block" (func $block))
  (core func $subscribe-lowered (canon lower (func $subscribe)))
  (core func $poll-lowered (canon lower (func $poll-fn) (memory $memory) (realloc $realloc)))
  (core func $block-lowered (canon lower (func $block)))

  (core module $main
    (import "env" "memory" (memory 1))
    (import "wasi" "subscribe-duration" (func $subscribe (param i64) (result i32)))
    (import "wasi" "poll" (func $poll (param i32 i32 i32)))
    (import "wasi" "block" (func $block (param i32)))
    (data (i32.const 16) "sleptawake")
    (func $ok (param $ptr i32) (param $len i32) (result i32)
      (i32.store8 (i32.const 64) (i32.const 0))
      (i32.store (i32.const 68) (local.get $ptr))
      (i32.store (i32.const 72) (local.get $len))
      (i32.const 64))
    (func (export "on-task-start") (param $tp i32) (param $tl i32) (param $cp i32) (param $cl i32)
          (result i32)
      (local $op i32)
      (local.set $op (i32.load8_u (local.get $tp)))
      (if (i32.eq (local.get $op) (i32.const 112))
        (then (i32.store (i32.const 128) (call $subscribe (i64.const 10000000000)))
              (call $poll (i32.const 128) (i32.const 1) (i32.const 136))))
      (if (i32.eq (local.get $op) (i32.const 98))
        (then (call $block (call $subscribe (i64.const 10000000000)))))
      (if (i32.eq (local.get $op) (i32.const 113))
        (then (i32.store (i32.const 128) (call $subscribe (i64.const 20000000)))
              (call $poll (i32.const 128) (i32.const 1) (i32.const 136))
              (return (call $ok (i32.const 16) (i32.const 5)))))
      (call $ok (i32.const 21) (i32.const 5))))
  (core instance $env (export "memory" (memory $memory)))
  (core instance $wasi (export "subscribe-duration" (func $subscribe-lowered))
                       (export "poll" (func $poll-lowered))
                       (export "block" (func $block-lowered)))
  (core instance $main-i (instantiate $main (with "env" (instance $env))
                                            (with "wasi" (instance $wasi))))

  (type $note (result string (error string)))
  (func $on-task-start (param "event" $task-start-event) (result $note)
    (canon lift (core func $main-i "on-task-start") (memory $memory) (realloc $realloc)
                string-encoding=utf8))
  (instance $handlers
    (export "task-start-event" (type $task-start-event))
    (export "on-task-start" (func $on-task-start)))
  (export "murmur:hook/handlers@0.8.0" (instance $handlers)))
