import numpy as np

def remove_slots(data: np.ndarray, entities: np.ndarray, sparse: np.ndarray,
                 slots: np.ndarray, bounds: list[int], /) -> list[int] | None: ...
