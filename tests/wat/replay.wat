;; The replay guest: `on-task-start` answers the context id it was given. `on-compact` looks
;; at the first message's content: "!loop" spins forever, "!trap" executes `unreachable`,
;; "!oom" grows memory until memory.grow fails and returns err("out of memory"); any other
;; window comes back without its first message.
(module
  (import "env" "memory" (memory 1))
  (import "env" "realloc" (func $realloc (param i32 i32 i32 i32) (result i32)))
  (import "host" "read-messages" (func $read (param i32 i32 i32 i32 i32)))
  (data (i32.const 32) "out of memory")

  (func $result (param $tag i32) (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.const 64) (local.get $tag))
    (i32.store (i32.const 68) (local.get $ptr))
    (i32.store (i32.const 72) (local.get $len))
    (i32.const 64))

  (func (export "on-task-start") (param $tp i32) (param $tl i32) (param $cp i32) (param $cl i32)
        (result i32)
    (call $result (i32.const 0) (local.get $cp) (local.get $cl)))

  (func (export "on-compact") (param $p i32) (param $n i32) (result i32)
    (local $c i32) (local $op i32)
    (if (i32.eqz (local.get $n))
      (then (return (call $result (i32.const 0) (local.get $p) (i32.const 0)))))
    (local.set $c (i32.load offset=16 (local.get $p)))
    (if (i32.and (i32.ge_u (i32.load offset=20 (local.get $p)) (i32.const 2))
                 (i32.eq (i32.load8_u (local.get $c)) (i32.const 33)))
      (then
        (local.set $op (i32.load8_u offset=1 (local.get $c)))
        (if (i32.eq (local.get $op) (i32.const 108)) (then (loop $spin (br $spin))))
        (if (i32.eq (local.get $op) (i32.const 116)) (then unreachable))
        (if (i32.eq (local.get $op) (i32.const 111))
          (then (loop $more
                  (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
                (return (call $result (i32.const 1) (i32.const 32) (i32.const 13)))))))
    (call $result (i32.const 0) (i32.add (local.get $p) (i32.const 48))
                  (i32.sub (local.get $n) (i32.const 1)))))
