"""What a receiver is known to be: an import, a builtin, or a value of this module's own classes.

Pure questions about the scopes the walk built; the resolver's rules ask them.
"""

from __future__ import annotations

import libcst as cst

from harness_import_boundary._syntax import (
    BUILTIN_NAMES,
    Scope,
    binding_scope,
    flatten_chain,
    identifier,
    resolve,
    static_string,
)

__all__ = ["imported_names", "is_builtins_module", "is_own"]


def imported_names(expression: cst.BaseExpression, scope: Scope) -> tuple[str, ...]:
    """The qualified names a chain on an imported name stands for (empty for anything else)."""
    chain = flatten_chain(expression)
    if chain is None:
        return ()
    names, _ = chain
    resolution = resolve(scope, names[0])
    if not resolution.from_import:
        return ()
    rest = "".join(f".{name}" for name in names[1:])
    return tuple(f"{qualified}{rest}" for qualified in resolution.qualified)


def is_builtins_module(expression: cst.BaseExpression, scope: Scope) -> bool:
    """Whether ``expression`` is the ``builtins`` module, imported."""
    return "builtins" in imported_names(expression, scope)


def is_own(
    scope: Scope, receiver: cst.BaseExpression | None, name: str, declared_attributes: set[str]
) -> bool:
    """Whether ``receiver`` is known: an import (the allow-list decides its attributes), a
    builtin, ``super()``, a class or function of this module, a method's own receiver, or
    a name annotated with or tested against a class of this module that declares ``name``
    (``declared_attributes`` holds the names the module's classes declare)."""
    if receiver is None:
        return False
    if isinstance(receiver, cst.Call):
        return "builtins.super" in imported_names(receiver.func, scope) or _is_builtin(
            receiver.func, scope, "super"
        )
    chain = flatten_chain(receiver)
    if chain is None:
        return False
    names, _ = chain
    base = names[0]
    resolution = resolve(scope, base)
    if resolution.from_import:
        return True
    if resolution.builtin:
        return base in BUILTIN_NAMES
    if len(names) > 1:
        return False
    home = binding_scope(scope, base)
    if home is None:
        return False
    if base in home.receivers or (base in home.definitions and base not in home.assignments):
        return True
    return not name.startswith("__") and name in declared_attributes and _narrowed_to_own(scope, home, base)


def _is_builtin(expression: cst.BaseExpression, scope: Scope, name: str) -> bool:
    return (
        isinstance(expression, cst.Name)
        and identifier(expression.value) == name
        and resolve(scope, name).builtin
    )


def _narrowed_to_own(scope: Scope, home: Scope, name: str) -> bool:
    """Whether an annotation of ``name`` or a test on it names classes of this module only."""
    current: Scope | None = scope
    types: list[cst.BaseExpression] = []
    while current is not None:
        types.extend(current.narrowed.get(name, ()))
        if current is home:
            break
        current = current.parent
    return bool(types) and any(_names_own_classes(expression, scope) for expression in types)


def _names_own_classes(expression: cst.BaseExpression, scope: Scope) -> bool:
    """``C``, ``C | D``, ``(C, D)`` or ``C | None`` where every class is of this module."""
    if isinstance(expression, cst.BinaryOperation) and isinstance(expression.operator, cst.BitOr):
        return _names_own_classes(expression.left, scope) and _names_own_classes(expression.right, scope)
    if isinstance(expression, cst.Tuple):
        return all(_names_own_classes(element.value, scope) for element in expression.elements)
    if isinstance(expression, cst.Name):
        name = identifier(expression.value)
        if name == "None":
            return True
        home = binding_scope(scope, name)
        return home is not None and name in home.classes and name not in home.assignments
    if isinstance(expression, cst.SimpleString | cst.ConcatenatedString):
        text = static_string(expression)
        return text is not None and text.isidentifier() and _names_own_classes(cst.Name(text), scope)
    return False
