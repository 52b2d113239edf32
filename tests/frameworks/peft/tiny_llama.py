"""The tiny LLaMA every PEFT job here fine-tunes, from a config (nothing is downloaded)."""

from transformers import LlamaConfig


def tiny_llama_config() -> LlamaConfig:
    return LlamaConfig(
        vocab_size=128,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
