"""The vault folder on disk: safe opening and reading (``vaultfs``), in-place appends (``appendfs``), scanning
(``folder``), edits, what the OS can do (``capabilities``), what a note path is (``paths``), the vanished-vault
checks (``vanished``) and content digests."""
