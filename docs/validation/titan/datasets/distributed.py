"""`split_dataset_by_node` of the datasets stand-in: every world_size-th row from rank."""
from . import Dataset


def split_dataset_by_node(ds, rank, world_size):
    return Dataset(list(ds)[rank::world_size])
