"""What the host reads, and rewrites, of a hook's code before wasmtime compiles it, and where
wasmtime compiles it.

:mod:`.compile_cost` counts what compiling a component would cost the kernel and refuses a
component past its bound; :mod:`.bounding` rewrites ``on-compact`` so its result is counted
inside the guest. Both read the WebAssembly binary with :mod:`.wasm_binary` (wasmtime-py
offers no view of a component's sections), whose bounds hold against hostile bytes; each
gives its :class:`~.wasm_binary.Malformed` its own meaning.
:mod:`.compile_bounds` compiles what passed in a child process bounded in time and memory,
which runs :mod:`.compiler` (the engine configuration, one copy for the kernel and the child).
"""
