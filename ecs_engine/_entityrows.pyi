from typing import Any

from ecs_engine.storage import ComponentStore

def insert_entity(stores: list[ComponentStore], key: int, slot: int, values: list[Any],
                  item: int, chunk_rows: int, /) -> bool: ...
def remove_entity(stores: Any, slot: int, chunk_rows: int, /) -> bool: ...
