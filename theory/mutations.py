"""Mutations of a derivation: one step or claimed form changed so that it is false.

A check that would pass whatever the mathematics says tells nothing. Each
mutation below changes the right-hand side of one equation (one entry of a
matrix equation), or the relation of an inequality, in a way that makes a
true statement false; a sound check of that item must then fail.
:func:`mutants` yields, for a derivation, every applicable mutation of every
step and claimed form, one at a time, as unchecked copies (no derivation is
rebuilt, so this is cheap); ``proofs_check`` uses the claim mutants as the
wrong theories of each derivation check. :func:`mutate`
makes one chosen mutant, :func:`sample` one per mutation (a cheap spot check),
and :func:`parse_label` turns a mutant's label back into the ``(kind, index)``
that :meth:`~attneb.theory.derivation.Derivation.check_item` takes::

    >>> from theory import get_derivation
    >>> from theory.mutations import mutants, parse_label
    >>> for label, name, broken in mutants(get_derivation("depth_noise"), kinds=("claim",)):  # doctest: +SKIP
    ...     assert not broken.check_item(*parse_label(label)).passed

The mutations, on ``Eq(lhs, rhs)`` with ``rhs = B + O(.)`` (``B`` free of ``O``):

- ``scale``: ``B -> (1 + 1/1000) B``. A number rather than a fresh symbol: a
  symbol takes values of order one at the random points of a numeric check,
  so it changes ``B`` by an O(1) factor, which any loose tolerance still
  catches; ``1/1000`` is caught only by a check accurate to better than
  ``10^-3``, and it cannot be absorbed into an ``O(.)`` term;
- ``add_term``: for ``B = 0`` (the right side is ``0`` or ``O(x^n)``),
  ``rhs -> rhs + s/1000`` with ``s`` a free symbol of the equation other than
  the variable of the ``O(.)`` (``1/1000`` itself when there is none);
- ``change_coefficient``: the first rational coefficient of ``B`` other than
  ``0`` and ``+-1`` (preorder, exponents and limits excluded) changed: an
  integer ``n -> n + sign(n)`` (``2 -> 3``), a fraction halved (``1/2 -> 1/4``);
- ``flip_sign``: ``B -> -B``;
- ``drop_factor_two``: ``B -> B/2``;
- ``bump_exponent``: the first rational exponent of ``B`` raised by one
  (``k**2 -> k**3``); a bare ``O(x**n)`` becomes ``O(x**(n + 1))``;
- ``bump_order``: every ``O(x**n)`` of ``rhs`` becomes ``O(x**(n + 1))``: the
  stated order must be sharp.

These apply to equations only. An inequality (a claimed form ``a >= b``,
``a > b``, ``a <= b`` or ``a < b``) has one mutation:

- ``negate``: the opposite claim, ``a >= b -> a < b`` (``a > b -> a <= b``, and
  so on). It is false wherever the original holds, whatever the slack.

Moving the bound instead (``b -> (1 + 1/1000) b``, ``b + s/1000``, ``-b``,
``b/2``, a changed coefficient or exponent) makes an inequality false only
where it held with less room than the move. An inequality is usually tight
only on a boundary or in a limit (a posterior variance is 0 only for a point
mass), so a moved bound still holds at the random points of the numeric check,
and is often still true: such mutants are not wrong statements, and none is
made. Whether a bound is sharp is a claim of its own (an equation for the
limit, or for the point where the bound is attained), which the equation
mutations then test.

``flip_sign`` and ``drop_factor_two`` change the first term of the first sum of
the left side instead when the right side is ``0``. ``bump_exponent`` does not:
on the left of ``... = 0`` the first exponent is often that of a normalising
constant the equation does not depend on (an odd Gaussian moment is 0 whatever
the normalisation), and such a mutant would leave the mathematics unchanged.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Iterator

import sympy as sp

from .derivation import Derivation

__all__ = [
    "EPSILON",
    "MUTATIONS",
    "add_term",
    "bump_exponent",
    "bump_order",
    "change_coefficient",
    "drop_factor_two",
    "flip_sign",
    "mutants",
    "mutate",
    "negate",
    "parse_label",
    "sample",
    "scale",
]

EPSILON = sp.Rational(1, 1000)


# --------------------------------------------------------------------------- expression surgery


def _split(rhs):
    """``(B, orders)`` with ``rhs = B + sum(orders)``, ``B`` free of ``O(.)``."""
    orders = [term for term in sp.Add.make_args(rhs) if isinstance(term, sp.Order)]
    return sp.Add(*[term for term in sp.Add.make_args(rhs) if not isinstance(term, sp.Order)]), orders


def _replace_first(expr, predicate, change, skip=()):
    """Rebuild ``expr`` with the first node (preorder) satisfying ``predicate`` changed; None if there is none.

    Orders, ``Tuple`` nodes (the limits of sums, integrals and derivatives)
    and the argument positions listed in ``skip`` (pairs ``(type, position)``)
    are not searched.
    """
    if isinstance(expr, (sp.Order, sp.Tuple)):
        return None
    if predicate(expr):
        return change(expr)
    for position, arg in enumerate(expr.args):
        if any(isinstance(expr, kind) and position == p for kind, p in skip):
            continue
        new = _replace_first(arg, predicate, change, skip)
        if new is not None:
            args = list(expr.args)
            args[position] = new
            return expr.func(*args)
    return None


def _with_rhs(eq, rhs):
    return None if rhs is None else sp.Eq(eq.lhs, rhs, evaluate=False)


def _first(expr, predicate):
    """First node (preorder) outside any ``O(.)`` that satisfies ``predicate``, or None."""
    if isinstance(expr, sp.Order):
        return None
    if predicate(expr):
        return expr
    for arg in expr.args:
        found = _first(arg, predicate)
        if found is not None:
            return found
    return None


def _on_body(eq, change):
    """Apply ``change`` to ``B``; when the right side is ``0``, to the first term of the first sum of the left side.

    None when there is nothing to change (``B = 0`` under an ``O(.)``, or no sum on the left).
    """
    body, orders = _split(eq.rhs)
    if body != 0:
        return sp.Eq(eq.lhs, change(body) + sp.Add(*orders), evaluate=False)
    node = _first(eq.lhs, lambda e: isinstance(e, sp.Add)) if eq.rhs == 0 else None
    if node is None:
        return None
    return sp.Eq(eq.lhs.xreplace({node: node.func(change(node.args[0]), *node.args[1:])}), eq.rhs, evaluate=False)


# --------------------------------------------------------------------------- the mutations


def _equations_only(mutation):
    """``mutation``, made to return None for an inequality (see the module docstring)."""
    @functools.wraps(mutation)
    def on_equations(eq):
        return mutation(eq) if isinstance(eq, sp.Equality) else None

    return on_equations


@_equations_only
def scale(eq):
    """``B -> (1 + EPSILON) B``; None when ``B = 0``."""
    body, orders = _split(eq.rhs)
    if body == 0:
        return None
    return sp.Eq(eq.lhs, (1 + EPSILON) * body + sp.Add(*orders), evaluate=False)


@_equations_only
def add_term(eq):
    """``rhs -> rhs + EPSILON s`` when ``B = 0``, ``s`` a free symbol not the variable of an ``O(.)``."""
    body, orders = _split(eq.rhs)
    if body != 0:
        return None
    variables = {v for order in orders for v in order.variables}
    candidates = sorted((s for s in eq.free_symbols if isinstance(s, sp.Symbol) and not isinstance(s, sp.Dummy)
                         and s not in variables and not _is_label(s, eq)), key=sp.default_sort_key)
    term = EPSILON * candidates[0] if candidates else EPSILON
    return sp.Eq(eq.lhs, eq.rhs + term, evaluate=False)


def _is_label(symbol, eq):
    """True when ``symbol`` is only the label of an ``IndexedBase`` in ``eq``."""
    return any(base.label == symbol for base in eq.atoms(sp.IndexedBase))


def _is_coefficient(e):
    return isinstance(e, sp.Rational) and e not in (0, 1, -1)


def _changed_coefficient(r):
    if r.is_Integer:
        return r + sp.sign(r)
    return r / 2


@_equations_only
def change_coefficient(eq):
    """The first rational coefficient of ``B`` other than ``0, +-1``: ``n -> n + sign(n)``, ``p/q -> p/(2q)``."""
    body, orders = _split(eq.rhs)
    new = _replace_first(body, _is_coefficient, _changed_coefficient, skip=((sp.Pow, 0), (sp.Pow, 1)))
    if new is None or new == body:
        return None
    return sp.Eq(eq.lhs, new + sp.Add(*orders), evaluate=False)


@_equations_only
def flip_sign(eq):
    """``B -> -B`` (or one term of the left side when the right side is 0)."""
    return _on_body(eq, lambda e: -e)


@_equations_only
def drop_factor_two(eq):
    """``B -> B/2`` (or one term of the left side when the right side is 0)."""
    return _on_body(eq, lambda e: e / 2)


def _bumped_order(order):
    (var,) = order.variables
    return sp.Order(order.expr * var, *order.args[1:])


@_equations_only
def bump_exponent(eq):
    """Raise by one the first rational exponent of ``B``; a bare ``O(x**n)`` on the right becomes ``O(x**(n + 1))``.

    Returns None when there is no exponent to change.
    """
    if isinstance(eq.rhs, sp.Order):
        return _with_rhs(eq, _bumped_order(eq.rhs))
    body, orders = _split(eq.rhs)
    changed = _replace_first(body, lambda e: isinstance(e, sp.Pow) and e.exp.is_Rational,
                             lambda e: sp.Pow(e.base, e.exp + 1))
    return None if changed is None else sp.Eq(eq.lhs, changed + sp.Add(*orders), evaluate=False)


@_equations_only
def bump_order(eq):
    """Every ``O(x**n)`` of the right side -> ``O(x**(n + 1))``; None without one."""
    orders = eq.rhs.atoms(sp.Order)
    if not orders:
        return None
    return _with_rhs(eq, eq.rhs.xreplace({order: _bumped_order(order) for order in orders}))


_NEGATIONS = {sp.GreaterThan: sp.StrictLessThan, sp.StrictGreaterThan: sp.LessThan,
              sp.LessThan: sp.StrictGreaterThan, sp.StrictLessThan: sp.GreaterThan}


def negate(eq):
    """The opposite inequality, ``a >= b -> a < b``, ``a > b -> a <= b`` (and so on); None for an equation."""
    opposite = _NEGATIONS.get(type(eq))
    return None if opposite is None else opposite(eq.lhs, eq.rhs, evaluate=False)


MUTATIONS: tuple[Callable, ...] = (scale, add_term, change_coefficient, flip_sign, drop_factor_two, bump_exponent,
                                   bump_order, negate)


# --------------------------------------------------------------------------- mutated derivations


def _entries(eq):
    """``[(entry, scalar equation)]``: one per matrix entry (``entry`` an int), or ``[(None, eq)]``."""
    if isinstance(eq.lhs, sp.MatrixBase) or isinstance(eq.rhs, sp.MatrixBase):
        lhs, rhs = sp.ImmutableMatrix(eq.lhs), sp.ImmutableMatrix(eq.rhs)
        return [(i, sp.Eq(a, b, evaluate=False)) for i, (a, b) in enumerate(zip(lhs, rhs))]
    return [(None, eq)]


def _put_back(eq, entry, scalar):
    if entry is None:
        return scalar
    lhs, rhs = sp.Matrix(eq.lhs), sp.Matrix(eq.rhs)
    lhs[entry], rhs[entry] = scalar.lhs, scalar.rhs
    return sp.Eq(sp.ImmutableMatrix(lhs), sp.ImmutableMatrix(rhs), evaluate=False)


def _replaced(derivation, kind, index, eq):
    if kind == "step":
        return derivation.with_step(index, eq)
    return derivation.with_claim(index, eq)


def mutate(derivation: Derivation, kind: str, index: int, mutation: Callable, entry: int | None = None):
    """Unchecked copy of ``derivation`` with item ``(kind, index)`` mutated, or None if the mutation does not apply.

    Parameters
    ----------
    derivation : Derivation
    kind : {"step", "claim"}
    index : int
        1-based, as in :meth:`Derivation.items`.
    mutation : callable
        One of :data:`MUTATIONS`.
    entry : int, optional
        For a matrix equation, the entry (row-major) to mutate; required there.
    """
    item = derivation.item(kind, index)
    entries = dict(_entries(item.eq))
    if entry not in entries:
        raise ValueError(f"{kind} {index} of {derivation.name!r} has entries {sorted(entries, key=str)}, "
                         f"got entry == {entry!r}")
    scalar = mutation(entries[entry])
    if scalar is None:
        return None
    return _replaced(derivation, kind, index, _put_back(item.eq, entry, scalar))


def mutants(derivation: Derivation, kinds=("step", "claim"), mutations=MUTATIONS) -> Iterator[tuple]:
    """Yield ``(label, mutation_name, mutated_derivation)`` for every applicable mutation of every item.

    ``label`` is ``"step 3"`` or ``"claim 2"``, with ``"[entry]"`` appended for
    an entry of a matrix equation (``"step 2[4]"``). A mutation that gives
    the same equation (or inequality) as an earlier one of the same entry, or
    the original, is skipped. The copies are unchecked and share everything else
    with ``derivation``.
    """
    for kind, index, item in derivation.items():
        if kind not in kinds:
            continue
        for entry, scalar in _entries(item.eq):
            seen = set()
            label = f"{kind} {index}" + ("" if entry is None else f"[{entry}]")
            for mutation in mutations:
                changed = mutation(scalar)
                if changed is None or changed == scalar or changed in seen:
                    continue
                seen.add(changed)
                yield label, mutation.__name__, _replaced(derivation, kind, index, _put_back(item.eq, entry, changed))


def sample(derivation: Derivation, mutation: Callable, kinds=("step", "claim")):
    """One ``(label, mutation_name, mutated_derivation)`` of ``mutation``, chosen by a hash of the names, or None.

    The choice is deterministic and spreads over the items: different
    derivations and mutations pick different items.
    """
    found = list(mutants(derivation, kinds, (mutation,)))
    if not found:
        return None
    return found[zlib.crc32(f"{derivation.name}:{mutation.__name__}".encode()) % len(found)]


def parse_label(label: str) -> tuple[str, int]:
    """``"step 2[4]"`` -> ``("step", 2)``: the item a mutant's label names."""
    kind, rest = label.split(" ")
    return kind, int(rest.split("[")[0])
