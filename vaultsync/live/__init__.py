"""The live side: the watcher, its debouncing, the file-system events it reads, overflow recovery, and the
writer role (which process writes a vault's changes)."""
