"""Write GPT-2's tokenizer.json, assembled from ../gpt2/encoder.json and
../gpt2/vocab.bpe the way Hugging Face's own gpt2 tokenizer.json is laid out,
to the path given as the only argument."""
import json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
vocab = json.load(open(os.path.join(here, "..", "gpt2", "encoder.json"), encoding="utf-8"))
lines = open(os.path.join(here, "..", "gpt2", "vocab.bpe"), encoding="utf-8").read().split("\n")
merges = [l for l in lines[1:] if l]
tok = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": 50256, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": True, "special": True}],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
              "end_of_word_suffix": "", "fuse_unk": False, "vocab": vocab, "merges": merges},
}
json.dump(tok, open(sys.argv[1], "w", encoding="utf-8"), ensure_ascii=False)
