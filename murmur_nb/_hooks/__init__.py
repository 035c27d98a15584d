"""Hook host: WebAssembly hook components run with wasmtime-py."""
