;; The misbehaving / probing guest. `on-task-start` looks at the task id:
;;   "!loop" spins forever, "!trap" executes `unreachable`, "!grow" grows memory until
;;   memory.grow fails and then traps, "!oom" grows until it fails and then returns
;;   err("out of memory"), "!deep" recurses until the stack overflows, "!bounds" loads
;;   past the end of memory, "!fail" returns err("guest says no"),
;;   "!read" / "!read:<cursor>" call read-messages(cursor, 100) and return
;;   ok("<count>|<total>|<newest id or ->|<next cursor or ->") or the read's err verbatim;
;;   any other id is echoed back as ok(id).
;; `on-compact` returns its input without the first message; given no messages it returns
;; the newest page of read-messages(none, 100) as the messages to keep (or the read's err).
(module
  (import "env" "memory" (memory 1))
  (import "env" "realloc" (func $realloc (param i32 i32 i32 i32) (result i32)))
  (import "host" "read-messages" (func $read (param i32 i32 i32 i32 i32)))
  (data (i32.const 16) "guest says no")
  (data (i32.const 32) "out of memory")

  (func $deep (param $n i32) (result i32)
    (i32.add (call $deep (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))

  (func $result (param $tag i32) (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.const 64) (local.get $tag))
    (i32.store (i32.const 68) (local.get $ptr))
    (i32.store (i32.const 72) (local.get $len))
    (i32.const 64))

  ;; decimal digits of $v written at $dst; returns the number of bytes
  (func $itoa (param $v i32) (param $dst i32) (result i32)
    (local $n i32) (local $t i32) (local $i i32)
    (local.set $n (i32.const 1))
    (local.set $t (local.get $v))
    (block $b (loop $l
      (br_if $b (i32.lt_u (local.get $t) (i32.const 10)))
      (local.set $t (i32.div_u (local.get $t) (i32.const 10)))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br $l)))
    (local.set $i (local.get $n))
    (loop $w
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (i32.store8 (i32.add (local.get $dst) (local.get $i))
                  (i32.add (i32.const 48) (i32.rem_u (local.get $v) (i32.const 10))))
      (local.set $v (i32.div_u (local.get $v) (i32.const 10)))
      (br_if $w (local.get $i)))
    (local.get $n))

  ;; copies ($p,$l) to $dst, or "-" when $l is -1; returns the new end
  (func $put (param $dst i32) (param $p i32) (param $l i32) (result i32)
    (if (i32.eq (local.get $l) (i32.const -1))
      (then (i32.store8 (local.get $dst) (i32.const 45))
            (return (i32.add (local.get $dst) (i32.const 1)))))
    (memory.copy (local.get $dst) (local.get $p) (local.get $l))
    (i32.add (local.get $dst) (local.get $l)))

  (func $do-read (param $tp i32) (param $tl i32) (result i32)
    (local $out i32) (local $end i32) (local $count i32) (local $msgs i32)
    (local $idp i32) (local $idl i32) (local $cp i32) (local $cl i32)
    (if (i32.gt_u (local.get $tl) (i32.const 6))
      (then (call $read (i32.const 1) (i32.add (local.get $tp) (i32.const 6))
                        (i32.sub (local.get $tl) (i32.const 6)) (i32.const 100) (i32.const 128)))
      (else (call $read (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 100)
                        (i32.const 128))))
    (if (i32.load8_u (i32.const 128))
      (then (return (call $result (i32.const 1) (i32.load (i32.const 132))
                                  (i32.load (i32.const 136))))))
    (local.set $msgs (i32.load (i32.const 132)))
    (local.set $count (i32.load (i32.const 136)))
    (local.set $idl (i32.const -1))
    (if (local.get $count)
      (then (local.set $idp (i32.load (local.get $msgs)))
            (local.set $idl (i32.load offset=4 (local.get $msgs)))))
    (local.set $cl (i32.const -1))
    (if (i32.load8_u (i32.const 140))
      (then (local.set $cp (i32.load (i32.const 144)))
            (local.set $cl (i32.load (i32.const 148)))))
    (local.set $out (call $realloc (i32.const 0) (i32.const 0) (i32.const 1)
      (i32.add (i32.const 32) (i32.add (local.get $cl) (local.get $idl)))))
    (local.set $end (i32.add (local.get $out) (call $itoa (local.get $count) (local.get $out))))
    (i32.store8 (local.get $end) (i32.const 124))
    (local.set $end (i32.add (local.get $end) (i32.const 1)))
    (local.set $end (i32.add (local.get $end)
                             (call $itoa (i32.load (i32.const 152)) (local.get $end))))
    (i32.store8 (local.get $end) (i32.const 124))
    (local.set $end (call $put (i32.add (local.get $end) (i32.const 1))
                               (local.get $idp) (local.get $idl)))
    (i32.store8 (local.get $end) (i32.const 124))
    (local.set $end (call $put (i32.add (local.get $end) (i32.const 1))
                               (local.get $cp) (local.get $cl)))
    (call $result (i32.const 0) (local.get $out) (i32.sub (local.get $end) (local.get $out))))

  (func (export "on-task-start") (param $tp i32) (param $tl i32) (param $cp i32) (param $cl i32)
        (result i32)
    (local $op i32)
    (if (i32.and (i32.ge_u (local.get $tl) (i32.const 2))
                 (i32.eq (i32.load8_u (local.get $tp)) (i32.const 33)))
      (then
        (local.set $op (i32.load8_u offset=1 (local.get $tp)))
        (if (i32.eq (local.get $op) (i32.const 108)) (then (loop $spin (br $spin))))
        (if (i32.eq (local.get $op) (i32.const 116)) (then unreachable))
        (if (i32.eq (local.get $op) (i32.const 103))
          (then (loop $grow
                  (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
                unreachable))
        (if (i32.eq (local.get $op) (i32.const 111))
          (then (loop $more
                  (br_if $more (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
                (return (call $result (i32.const 1) (i32.const 32) (i32.const 13)))))
        (if (i32.eq (local.get $op) (i32.const 100))
          (then (return (call $deep (i32.const 0)))))
        (if (i32.eq (local.get $op) (i32.const 98))
          (then (return (i32.load (i32.const -8)))))
        (if (i32.eq (local.get $op) (i32.const 102))
          (then (return (call $result (i32.const 1) (i32.const 16) (i32.const 13)))))
        (if (i32.eq (local.get $op) (i32.const 114))
          (then (return (call $do-read (local.get $tp) (local.get $tl)))))))
    (call $result (i32.const 0) (local.get $tp) (local.get $tl)))

  (func (export "on-compact") (param $p i32) (param $n i32) (result i32)
    (if (i32.eqz (local.get $n))
      (then
        (call $read (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 100) (i32.const 128))
        (return (call $result (i32.load8_u (i32.const 128)) (i32.load (i32.const 132))
                              (i32.load (i32.const 136))))))
    (call $result (i32.const 0) (i32.add (local.get $p) (i32.const 48))
                  (i32.sub (local.get $n) (i32.const 1)))))
