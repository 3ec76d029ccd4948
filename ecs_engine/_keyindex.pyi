import numpy as np

def index_slot_keys(keys: np.ndarray, generations: np.ndarray, alive: np.ndarray,
                    sparse: np.ndarray, /) -> int: ...
