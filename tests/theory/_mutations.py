"""Mutations of a derivation step: each turns a true equation into a false one."""

from __future__ import annotations

import sympy as sp


def _first(expr, predicate):
    """First node (preorder) outside any ``O(.)`` that satisfies ``predicate``."""
    if isinstance(expr, sp.Order):
        return None
    if predicate(expr):
        return expr
    for arg in expr.args:
        found = _first(arg, predicate)
        if found is not None:
            return found
    return None


def _is_term_sum(node):
    return isinstance(node, sp.Add) and not node.has(sp.Order)


def _mutate(eq, change):
    """Apply ``change`` to the right side; to one term of the left side when the right side is 0.

    None when the right side is 0 and the left side has no sum to change.
    """
    if isinstance(eq.rhs, sp.Order):
        return bump_exponent(eq)
    if eq.rhs != 0:
        return sp.Eq(eq.lhs, change(eq.rhs), evaluate=False)
    node = _first(eq.lhs, _is_term_sum)
    if node is None:
        return None
    changed = node.func(change(node.args[0]), *node.args[1:])
    return sp.Eq(eq.lhs.xreplace({node: changed}), eq.rhs, evaluate=False)


def flip_sign(eq):
    """Flip the sign of the right side (or of one term of the left side)."""
    return _mutate(eq, lambda e: -e)


def drop_factor_two(eq):
    """Halve the right side (or one term of the left side)."""
    return _mutate(eq, lambda e: e / 2)


def bump_exponent(eq):
    """Raise by one the first rational exponent of the right side (the left side when it is 0).

    A bare ``O(x**n)`` on the right becomes ``O(x**(n + 1))``. Returns None
    when there is no exponent to change.
    """
    if isinstance(eq.rhs, sp.Order):
        (var,) = eq.rhs.variables
        return sp.Eq(eq.lhs, sp.Order(eq.rhs.expr * var, *eq.rhs.args[1:]), evaluate=False)
    side = eq.rhs if eq.rhs != 0 else eq.lhs
    node = _first(side, lambda e: isinstance(e, sp.Pow) and e.exp.is_Rational)
    if node is None:
        return None
    changed = side.xreplace({node: sp.Pow(node.base, node.exp + 1)})
    if side is eq.rhs and eq.rhs != 0:
        return sp.Eq(eq.lhs, changed, evaluate=False)
    return sp.Eq(changed, eq.rhs, evaluate=False)


MUTATIONS = (flip_sign, drop_factor_two, bump_exponent)
