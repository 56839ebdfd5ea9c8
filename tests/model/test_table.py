"""The token sampler :func:`attnrmt.model.table.sample_tokens` against its law
(docs/model.md, "Tokens, pooling and S": token ``v_{n,t}`` uniform among the ``V/2`` tokens
of class ``xi_{n,t}``; tokens ``0 .. V/2 - 1`` are class +1, the rest class -1).

Test: at small ``V`` the sampler draws ``M = 200,000`` tokens for fair random signs
(drawn here, with their own generator) and every token's frequency inside its class is
compared with the uniform law by Pearson's chi-square (``V/2 - 1`` degrees of freedom per
class), at significance ``ALPHA = 1e-3`` per class. Fixed seeds, so the outcome is
deterministic; measured p-values 0.53 and 0.65 (``V = 4``, classes +1 and -1), 0.53 and
0.79 (``V = 10``), all far from ``ALPHA``. Power (noncentral chi-square, ~100,000 draws a
class): a token drawn 5% too rarely (the others compensating) is rejected with
probability 0.9999 at ``V = 10`` and 1.0 at ``V = 4``; 2% too rarely: 0.23 at ``V = 10``,
0.9988 at ``V = 4``. A token never drawn gives a chi-square of ~25,000 (``V = 10``) against
the critical 18.5.

Breaking the code on purpose (scratch edit of ``sample_tokens``, restored): drawing
``rng.integers(0, half - 1)`` (the last token of each class never drawn) fails both sizes
with p = 0 (chi-square 25,000 and 100,000 against 18.5 and 10.8).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from attnrmt.model.table import sample_tokens

ALPHA = 1e-3
N_SEQUENCES, T = 20_000, 10  # M = 200,000 tokens


def class_counts(tokens: np.ndarray, signs: np.ndarray, V: int) -> dict[int, np.ndarray]:
    """Counts of every token among the draws of each class (+1: tokens 0 .. V/2 - 1)."""
    half = V // 2
    return {
        +1: np.bincount(tokens[signs > 0], minlength=V)[:half],
        -1: np.bincount(tokens[signs < 0], minlength=V)[half:],
    }


@pytest.mark.parametrize("V", [4, 10])
def test_token_sampler_draws_every_token_of_its_class_uniformly(V: int) -> None:
    signs = np.random.default_rng([V, 7]).choice(
        np.array([-1, 1], dtype=np.int8), size=(N_SEQUENCES, T)
    )
    tokens = sample_tokens(signs, V, np.random.default_rng([V, 8]))
    assert tokens.shape == signs.shape and tokens.dtype == np.int64
    half = V // 2
    # every draw is a token of its own class
    assert np.all((tokens >= 0) & (tokens < V))
    np.testing.assert_array_equal(tokens < half, signs > 0)
    for sign, counts in class_counts(tokens, signs, V).items():
        assert counts.sum() == np.sum(signs == sign)
        result = stats.chisquare(counts)  # uniform expectation counts.sum() / half
        assert result.pvalue > ALPHA, (V, sign, counts.tolist(), float(result.statistic))
