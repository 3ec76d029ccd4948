from typing import Any

def configure(query_type: type, plan_type: type, clock_type: type, state_type: type,
              no_keys: object, slow_enter: Any, slow_exit: Any, slow_query: Any, /) -> None: ...

enter: Any
exit: Any
query: Any
