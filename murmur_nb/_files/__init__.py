"""Files beneath a folder: opened without leaving it, fstat-checked, hashed; claims re-checked."""
