"""factored.py — FactoredMatrix: a product A @ B kept as its two factors (TransformerLens' class,
written here over NumPy), for the OV and QK circuits (model.OV, model.QK): [..., d_model, d_model]
matrices of rank d_head, whose SVD, eigenvalues and norms come from the factors without forming
the product.

    OV = model.OV                      # [L, H, d, d] = W_V @ W_O, as two factors
    OV[1, 3].AB                        # the product itself, [d, d]
    U, S, Vh = OV[1, 3].svd()          # AB = U @ diag(S) @ Vh.T (TransformerLens' convention: Vh is V)
    (model.W_E @ OV[1, 3] @ model.W_U)  # a FactoredMatrix [V, V], still rank d_head
    OV[1, 3].collapse_l()              # S Vh^T, [d_head, d]: the product without U (AB = U @ it)

Leading axes broadcast as NumPy does; float64 results where the factors are (float32 stays float32).
"""
import numbers

import numpy as np


class FactoredMatrix:
    """A @ B with A [..., ldim, mdim] and B [..., mdim, rdim]."""

    __array_ufunc__ = None  # (array @ FactoredMatrix: NumPy defers to __rmatmul__)

    def __init__(self, A, B):
        A, B = np.asarray(A), np.asarray(B)
        if A.ndim < 2 or B.ndim < 2:
            raise ValueError("FactoredMatrix: A and B must be matrices (at least 2-d), got %s and %s" % (A.shape, B.shape))
        if A.shape[-1] != B.shape[-2]:
            raise ValueError("FactoredMatrix: A %s and B %s do not chain (A's last axis must be B's second to last)"
                             % (A.shape, B.shape))
        lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        self.A = np.broadcast_to(A, lead + A.shape[-2:])
        self.B = np.broadcast_to(B, lead + B.shape[-2:])
        self.ldim, self.mdim, self.rdim = A.shape[-2], A.shape[-1], B.shape[-1]
        self.shape = lead + (self.ldim, self.rdim)
        self.ndim = len(self.shape)

    # ---- the product ------------------------------------------------------------------------------

    @property
    def AB(self):
        """the product, [..., ldim, rdim]"""
        return self.A @ self.B

    @property
    def BA(self):
        """B @ A, [..., mdim, mdim] (needs ldim == rdim): the same non-zero eigenvalues as AB"""
        if self.ldim != self.rdim:
            raise ValueError("FactoredMatrix.BA: only for a square product (ldim %d, rdim %d)" % (self.ldim, self.rdim))
        return self.B @ self.A

    @property
    def T(self):
        return FactoredMatrix(np.swapaxes(self.B, -1, -2), np.swapaxes(self.A, -1, -2))

    def pair(self):
        return self.A, self.B

    # ---- products with other matrices --------------------------------------------------------------

    def __matmul__(self, other):
        if isinstance(other, FactoredMatrix):
            # (keep the smaller inner dimension: A (B A') B' as one factor pair)
            if self.mdim <= other.mdim:
                return FactoredMatrix(self.A, (self.B @ other.A) @ other.B)
            return FactoredMatrix((self.A @ self.B) @ other.A, other.B)
        o = np.asarray(other)
        if o.ndim == 1:  # (as a column, so that stacked factors keep their leading axes)
            return (self.A @ (self.B @ o[:, None]))[..., 0]
        return FactoredMatrix(self.A, self.B @ o)

    def __rmatmul__(self, other):
        o = np.asarray(other)
        if o.ndim == 1:
            return ((o[None, :] @ self.A) @ self.B)[..., 0, :]
        return FactoredMatrix(o @ self.A, self.B)

    def __mul__(self, scalar):
        if not isinstance(scalar, numbers.Number):
            raise TypeError("FactoredMatrix * %s: only a number (use @ for products)" % type(scalar).__name__)
        return FactoredMatrix(self.A * scalar, self.B)

    __rmul__ = __mul__

    # ---- indexing ------------------------------------------------------------------------------------

    def __getitem__(self, idx):
        """leading axes index both factors; an index on the last two picks A's rows / B's columns"""
        if not isinstance(idx, tuple):
            idx = (idx,)
        if any(i is Ellipsis or i is None for i in idx):
            raise IndexError("FactoredMatrix: index with integers and slices (no ... or None)")
        lead = self.ndim - 2
        if len(idx) > self.ndim:
            raise IndexError("FactoredMatrix: %d indices for %d axes" % (len(idx), self.ndim))
        head, rows, cols = idx[:lead], idx[lead:lead + 1], idx[lead + 1:lead + 2]
        A = self.A[tuple(head)] if head else self.A
        B = self.B[tuple(head)] if head else self.B
        if rows:
            r = rows[0]
            A = A[..., r:r + 1, :] if isinstance(r, numbers.Integral) else A[..., r, :]
        if cols:
            c = cols[0]
            B = B[..., c:c + 1] if isinstance(c, numbers.Integral) else B[..., c]
        out = FactoredMatrix(A, B)
        if (rows and isinstance(rows[0], numbers.Integral)) or (cols and isinstance(cols[0], numbers.Integral)):
            m = out.AB  # (an integer on a matrix axis drops it, as NumPy: the values themselves)
            if rows and isinstance(rows[0], numbers.Integral):
                m = m[..., 0, :]
            if cols and isinstance(cols[0], numbers.Integral):
                m = m[..., 0]
            return m
        return out

    def get_corner(self, k=3):
        """the top-left k x k block of AB (of every leading index), from the factors' first rows / columns"""
        return self.A[..., :k, :] @ self.B[..., :, :k]

    # ---- spectra -------------------------------------------------------------------------------------

    def svd(self):
        """(U [..., ldim, k], S [..., k], Vh [..., rdim, k]) with AB = U @ diag(S) @ Vh^T, k = min(ldim,
        mdim, rdim): the SVDs of A and B, then of the small middle matrix (no ldim x rdim product).
        As TransformerLens, "Vh" is V (its columns are AB's right singular vectors)."""
        Ua, Sa, Vha = np.linalg.svd(self.A, full_matrices=False)     # A = Ua Sa Vha
        Ub, Sb, Vhb = np.linalg.svd(self.B, full_matrices=False)     # B = Ub Sb Vhb
        middle = Sa[..., :, None] * (Vha @ Ub) * Sb[..., None, :]    # AB = Ua middle Vhb
        Um, Sm, Vhm = np.linalg.svd(middle, full_matrices=False)
        k = min(self.ldim, self.mdim, self.rdim)
        U = (Ua @ Um)[..., :k]
        V = np.swapaxes(Vhm @ Vhb, -1, -2)[..., :k]
        return U, Sm[..., :k], V

    @property
    def U(self):
        return self.svd()[0]

    @property
    def S(self):
        return self.svd()[1]

    @property
    def Vh(self):
        return self.svd()[2]

    @property
    def eigenvalues(self):
        """the eigenvalues of BA ([..., mdim], complex): AB's non-zero ones (AB's others are 0)"""
        return np.linalg.eigvals(self.BA)

    def collapse_l(self):
        """S[..., :, None] * Vh^T, [..., k, rdim]: AB without its left orthogonal factor (AB = U @ collapse_l()),
        so collapse_l()^T collapse_l() = (AB)^T AB"""
        _, S, V = self.svd()
        return S[..., :, None] * np.swapaxes(V, -1, -2)

    def collapse_r(self):
        """U * S[..., None, :], [..., ldim, k]: AB without its right orthogonal factor (AB = collapse_r() @ Vh^T)"""
        U, S, _ = self.svd()
        return U * S[..., None, :]

    def make_even(self):
        """the same product as the factors U sqrt(S) and sqrt(S) Vh^T (each factor carries half of the
        singular values: A^T A = B B^T = diag(S)), inner dimension k"""
        U, S, V = self.svd()
        r = np.sqrt(S)
        return FactoredMatrix(U * r[..., None, :], np.swapaxes(V * r[..., None, :], -1, -2))

    def unsqueeze(self, k):
        """a new axis of length 1 at position k of the leading axes (both factors get it): k in 0..ndim-2,
        or negative, counted from the end of the new shape, in -(ndim+1)..-3 (the matrix axes stay last)"""
        if isinstance(k, bool) or not isinstance(k, numbers.Integral):
            raise TypeError("FactoredMatrix.unsqueeze: k must be an integer, got %r" % (k,))
        pos = k if k >= 0 else k + self.ndim + 1
        if not 0 <= pos <= self.ndim - 2:
            raise ValueError("FactoredMatrix.unsqueeze(%d): the new axis must be a leading axis of a shape with %d "
                             "axes (0..%d, or -%d..-3); the last two are the matrix's" % (k, self.ndim, self.ndim - 2,
                                                                                         self.ndim + 1))
        return FactoredMatrix(np.expand_dims(self.A, pos), np.expand_dims(self.B, pos))

    def norm(self):
        """the Frobenius norm of AB, [...]"""
        return np.sqrt((self.S.astype(np.float64) ** 2).sum(-1))

    def __repr__(self):
        return "FactoredMatrix(shape %s, hidden dim %d)" % (self.shape, self.mdim)


__all__ = ["FactoredMatrix"]
