"""mypy plugin for ``@component`` classes: numpy-typed fields with plain Python defaults.

Enable it in your project's mypy configuration::

    [tool.mypy]
    plugins = ["ecs_engine.mypy_plugin"]

``@component`` is declared with ``typing.dataclass_transform``, so any type checker sees the
constructor; on top of that, this plugin teaches mypy what the engine does at runtime:

- ``x: np.float32 = 0.0`` is accepted: a class-body default is converted to the field's dtype
  when the class is decorated, so it is checked as a value a field accepts (like
  ``field(default=0.0)``), not as an instance of ``np.float32``;
- every constructor parameter is optional (a field left out takes its default) and accepts a
  Python or numpy scalar, or an array / sequence (a batch: one value per entity), while
  unknown keywords (``Position(xx=1)``) stay errors.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import (
    ARG_NAMED,
    ARG_NAMED_OPT,
    ARG_OPT,
    ARG_POS,
    GDEF,
    Argument,
    AssignmentStmt,
    CallExpr,
    DataclassTransformSpec,
    EllipsisExpr,
    FuncDef,
    NameExpr,
    RefExpr,
    TempNode,
    TypeInfo,
)
from mypy.plugin import ClassDefContext, Plugin, SemanticAnalyzerPluginInterface
from mypy.plugins.common import add_method_to_class
from mypy.plugins.dataclasses import DataclassTransformer
from mypy.semanal_shared import find_dataclass_transform_spec
from mypy.typeops import make_simplified_union
from mypy.types import AnyType, Instance, NoneType, Type, TypeOfAny

COMPONENT = "ecs_engine.component.component"
FIELD = "ecs_engine.component.field"
FIELD_DEFAULT = "ecs_engine.component.field_default"


class ComponentPlugin(Plugin):
    """Routes ``@component`` through :func:`_transform_component`."""

    def get_class_decorator_hook_2(
        self, fullname: str
    ) -> Callable[[ClassDefContext], bool] | None:
        return _transform_component if fullname == COMPONENT else None


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point."""
    return ComponentPlugin


def _transform_component(ctx: ClassDefContext) -> bool:
    """The dataclass transform, with defaults checked as field values and a lenient __init__."""
    if not _defaults_as_field_calls(ctx):
        return False
    spec = find_dataclass_transform_spec(ctx.reason)
    if spec is None:
        return True
    # Keyword-only while the dataclass plugin collects fields: every field has a default at
    # runtime, so its "no default after a default" rule does not apply; _widen_init then
    # makes the parameters positional-or-keyword again, in declaration order.
    lenient = DataclassTransformSpec(
        eq_default=spec.eq_default, order_default=spec.order_default, kw_only_default=True,
        field_specifiers=spec.field_specifiers, frozen_default=spec.frozen_default)
    if not DataclassTransformer(ctx.cls, ctx.reason, lenient, ctx.api).transform():
        return False  # a base class is not ready yet: mypy calls again
    return _widen_init(ctx)


def _is_call_of(expr: object, fullname: str) -> bool:
    return (isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr)
            and expr.callee.fullname == fullname)


def _defaults_as_field_calls(ctx: ClassDefContext) -> bool:
    """Rewrite ``x: T = value`` to ``x: T = field_default(value)`` in the class body.

    At runtime the decorator converts ``value`` to the field's dtype, so the checker should
    compare it with the values a field accepts (``field_default``'s parameter, the same as
    ``field(default=...)``'s), not with ``T`` itself.
    """
    sym = ctx.api.lookup_fully_qualified_or_none(FIELD_DEFAULT)
    if sym is None or sym.node is None:
        return False
    for stmt in ctx.cls.defs.body:
        if not (isinstance(stmt, AssignmentStmt) and stmt.new_syntax
                and len(stmt.lvalues) == 1 and isinstance(stmt.lvalues[0], NameExpr)):
            continue
        if stmt.lvalues[0].name.startswith("_"):
            continue  # not a field: the decorator leaves underscore names alone
        rvalue = stmt.rvalue
        if (isinstance(rvalue, TempNode) or _is_call_of(rvalue, FIELD)
                or _is_call_of(rvalue, FIELD_DEFAULT)):
            continue  # no default, field(...), or rewritten in an earlier pass
        callee = NameExpr("field_default")
        callee.node = sym.node
        callee.fullname = FIELD_DEFAULT
        callee.kind = GDEF
        callee.set_line(stmt.rvalue)
        call = CallExpr(callee, [stmt.rvalue], [ARG_POS], [None])
        call.set_line(stmt.rvalue)
        stmt.rvalue = call
    return True


def _any_instance(api: SemanticAnalyzerPluginInterface, fullname: str) -> Instance | None:
    sym = api.lookup_fully_qualified_or_none(fullname)
    if sym is None or not isinstance(sym.node, TypeInfo):
        return None
    info = sym.node
    return Instance(info, [AnyType(TypeOfAny.special_form)] * len(info.defn.type_vars))


def _widen_init(ctx: ClassDefContext) -> bool:
    """Make every field parameter optional and accept scalars or arrays (batches)."""
    info = ctx.cls.info
    sym = info.names.get("__init__")
    if sym is None or not sym.plugin_generated or not isinstance(sym.node, FuncDef):
        return True  # a tag (no fields) keeps object's __init__
    # the same as ecs_engine.component.FieldValue
    extra: list[Type] = [ctx.api.named_type("builtins.float")]
    for name in ("numpy.generic", "numpy.ndarray", "builtins.list", "builtins.tuple"):
        inst = _any_instance(ctx.api, name)
        if inst is None:
            return False  # numpy not analysed yet
        extra.append(inst)
    args: list[Argument] = []
    for arg in sym.node.arguments[1:]:  # [0] is self
        if arg.variable.name.startswith("_"):
            continue  # class attributes, not fields: the constructor refuses them
        declared = arg.type_annotation or AnyType(TypeOfAny.unannotated)
        kind = ARG_OPT if arg.kind in (ARG_POS, ARG_OPT, ARG_NAMED, ARG_NAMED_OPT) else arg.kind
        args.append(Argument(arg.variable, make_simplified_union([declared, *extra]),
                             EllipsisExpr(), kind))
    ctx.cls.defs.body.remove(sym.node)  # replace, rather than shadow, the generated one
    del info.names["__init__"]
    add_method_to_class(ctx.api, ctx.cls, "__init__", args=args, return_type=NoneType())
    return True
