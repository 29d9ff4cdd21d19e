"""Embeddings and the search tokenizer: the provider registry, the built-in embedders, the optional MiniLM
model (``semantic``) and the tokenizer that indexes text and parses queries."""
