"""Files beneath a folder: opened without leaving it, fstat-checked, hashed; artifact claims re-validated."""
