from typing import Any

def configure(query_type: type, plan_type: type, clock_type: type, state_type: type,
              no_keys: object, slow_enter: Any, slow_exit: Any, slow_query: Any, /) -> None: ...
def configure_columns(store_type: type, array_type: type, chunk_rows: int, slow_getitem: Any,
                      slow_unstructured: Any, /) -> None: ...

enter: Any
exit: Any
query: Any
column: Any
flat_column: Any
