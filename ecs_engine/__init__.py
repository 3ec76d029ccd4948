"""ecs_engine: a columnar Entity-Component-System for Python games."""

from ecs_engine.blueprint import Blueprint, DanglingRef, Instance
from ecs_engine.component import ComponentSchema, FieldSpec, component, field, schema_of
from ecs_engine.entity import NULL, Entity, KeyLike, format_key, key_generation, key_slot, make_key
from ecs_engine.group import Group
from ecs_engine.hierarchy import ChildOf, depth_levels
from ecs_engine.history import History
from ecs_engine.migrate import SchemaChangeWarning
from ecs_engine.prefab import ChildPrefab, Param, Prefab, PrefabError, PrefabRegistry
from ecs_engine.query import Query
from ecs_engine.record import Record
from ecs_engine.rollback import DesyncError, Rollback, SyncTest
from ecs_engine.savefile import SaveFileError
from ecs_engine.snapshot import RestoreCallbackError, RestoreEvent, Snapshot, StoreSnapshot
from ecs_engine.storage import ComponentStore
from ecs_engine.world import System, World

__version__ = "0.2.0"  # the same as pyproject.toml (tests/test_packaging.py)

__all__ = [
    "NULL",
    "Blueprint",
    "ChildOf",
    "ChildPrefab",
    "ComponentSchema",
    "ComponentStore",
    "DanglingRef",
    "DesyncError",
    "Entity",
    "FieldSpec",
    "Group",
    "History",
    "Instance",
    "KeyLike",
    "Param",
    "Prefab",
    "PrefabError",
    "PrefabRegistry",
    "Query",
    "Record",
    "RestoreCallbackError",
    "RestoreEvent",
    "Rollback",
    "SaveFileError",
    "SchemaChangeWarning",
    "Snapshot",
    "StoreSnapshot",
    "SyncTest",
    "System",
    "World",
    "__version__",
    "component",
    "depth_levels",
    "field",
    "format_key",
    "key_generation",
    "key_slot",
    "make_key",
    "schema_of",
]
