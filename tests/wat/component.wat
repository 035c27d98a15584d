;; A hook component in the `hook` world, written as component text and loaded by wasmtime
;; directly. `@MAIN@` is replaced by a core module that imports its memory and allocator
;; from "env" and the lowered `read-messages` from "host", and exports "on-task-start"
;; and "on-compact" in the canonical ABI. The memory lives in its own little module so the
;; import can be lowered before the main module is instantiated.
(component
  (type $lifecycle (instance
    (type $opt (option string))
    (type $msg (record (field "id" string) (field "role" string) (field "content" string)
                       (field "name" $opt) (field "created-at" $opt)))
    (export "message" (type (eq $msg)))
    (type $ev (record (field "task-id" string) (field "context-id" string)))
    (export "task-start-event" (type (eq $ev)))))
  (import "murmur:hook/lifecycle@0.8.0" (instance $lc (type $lifecycle)))
  (alias export $lc "message" (type $message))
  (alias export $lc "task-start-event" (type $task-start-event))

  (type $read-api (instance
    (alias outer 1 $message (type $m))
    (export "message" (type $m2 (eq $m)))
    (type $list (list $m2))
    (type $opt (option string))
    (type $page (record (field "messages" $list) (field "next-cursor" $opt) (field "total" u32)))
    (export "message-page" (type $page2 (eq $page)))
    (type $res (result $page2 (error string)))
    (type $fn (func (param "cursor" $opt) (param "limit" u32) (result $res)))
    (export "read-messages" (func (type $fn)))))
  (import "murmur:conversation/read@0.1.0" (instance $read (type $read-api)))

  (core module $mem
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 4096))
    ;; bump allocator: cabi_realloc(old_ptr, old_size, align, new_size) -> ptr
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $ptr i32)
      (local.set $ptr
        (i32.and (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
                 (i32.xor (i32.sub (local.get 2) (i32.const 1)) (i32.const -1))))
      (global.set $next (i32.add (local.get $ptr) (local.get 3)))
      (block $done
        (loop $more
          (br_if $done (i32.le_u (global.get $next)
                                 (i32.mul (memory.size) (i32.const 65536))))
          (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then unreachable))
          (br $more)))
      (local.get $ptr)))
  (core instance $mem-i (instantiate $mem))
  (alias core export $mem-i "memory" (core memory $memory))
  (alias core export $mem-i "realloc" (core func $realloc))

  (alias export $read "read-messages" (func $read-messages))
  (core func $read-lowered
    (canon lower (func $read-messages) (memory $memory) (realloc $realloc) string-encoding=utf8))

  (core module $main @MAIN@)
  (core instance $env (export "memory" (memory $memory)) (export "realloc" (func $realloc)))
  (core instance $host (export "read-messages" (func $read-lowered)))
  (core instance $main-i (instantiate $main (with "env" (instance $env))
                                            (with "host" (instance $host))))

  (type $note (result string (error string)))
  (type $messages (list $message))
  (type $kept (result $messages (error string)))
  (func $on-task-start (param "event" $task-start-event) (result $note)
    (canon lift (core func $main-i "on-task-start") (memory $memory) (realloc $realloc)
                string-encoding=utf8))
  (func $on-compact (param "messages" $messages) (result $kept)
    (canon lift (core func $main-i "on-compact") (memory $memory) (realloc $realloc)
                string-encoding=utf8))
  (instance $handlers
    (export "message" (type $message))
    (export "task-start-event" (type $task-start-event))
    (export "on-task-start" (func $on-task-start))
    (export "on-compact" (func $on-compact)))
  (export "murmur:hook/handlers@0.8.0" (instance $handlers)))
