"""A stand-in for Hugging Face's `datasets`, for the lent H200 (no network, no pyarrow).

TorchTitan v0.2.2's text dataset calls `load_dataset(path, split="train")` for `c4_test` and
`split_dataset_by_node`; this serves generated text of English-like words instead of the
repository's test file (data does not change a step's time or memory: every sample is packed into
`seq_len` tokens). The equivalent of Megatron's `--mock-data`, named as such.
"""
import random

_WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there one all we their can has more would will been if no "
    "when some what so about into out time only other new could than first after years these two "
    "model training memory layer batch step token sequence attention expert gradient optimizer"
).split()


class Dataset:
    """A map-style dataset of {"text": ...} rows."""

    def __init__(self, rows):
        self._rows = rows

    def __len__(self):
        return len(self._rows)

    def __iter__(self):
        return iter(self._rows)

    def skip(self, n):
        return Dataset(self._rows[n:])


def load_dataset(path, name=None, split="train", streaming=False, **_):
    rng = random.Random(0)
    rows = [
        {"text": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(200, 800)))}
        for _ in range(20000)
    ]
    return Dataset(rows)
