"""Training with search (``arena.algo=alphazero`` and the updates of the search phase,
``arena.search.updates``): the learner plays its moves with PUCT search guided by its own
network; the search's visit counts become the policy targets and the game outcomes the
value targets (Silver et al., AlphaZero). With ``arena.search.policy_target=completed_q``
the policy target is Gumbel AlphaZero's improved policy instead
(`completed_q_policy`); with ``arena.search.gumbel_considered`` its root search too
(`GumbelRoot`: sampled moves and sequential halving instead of root noise, the move
played its choice, `gumbel_moves`).

Training games add Dirichlet noise at the root and sample moves in proportion to the
visit counts for the first ``search.temperature_moves`` plies of a game, then play the
most visited move. All games of a step are searched together, one network call per
simulation (`PUCTSearch`).

A policy with ``value_discount`` below 1 learns discounted outcomes (``+-discount ** k``
for a game decided ``k`` plies after the position) and its searches back values up with
the same discount: among winning moves the sooner win is worth more, among losing ones
the later loss, as the perfect solver's exact scores order them. A policy with the
moves-left head (``agents.policy.moves_left``, Leela Chess Zero's) also learns the plies
left until each game ended (`moves_left_targets`), and its searches use them with
``agents.policy.moves_left_weight`` (`MCTS`). With
``arena.update.replay`` the samples of past search updates are trained on again
(`.replay`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle.nn.functional as F

from paddlecraft.agents.value_head import hl_gauss_targets

from ..games.core import BoardGame
from ..games.evaluators import powered, prior_tempered
from ..games.search import (
    CachedEvaluator,
    NetworkEvaluator,
    PUCTSearch,
    SearchResult,
    TreeReuse,
    choose_moves,
    completed_q_policy,
    decided_visits,
    pruned_visits,
)
from ..games.search_results import near_best_visits
from .search_config import _in_opening, sampling_temperature, simulations_at


def search_controller(
    policy: Any, rules: type[BoardGame], cfg: Any, rng: np.random.Generator
) -> Any:
    """A collection controller: ``(planes, masks) -> (actions, {"pi", "root_value"})``.

    ``cfg`` is ``arena.search`` (`SearchConfig`): ``simulations``,
    ``second_player_simulations``, ``c_puct``, ``dirichlet_alpha``,
    ``opening_dirichlet_alpha``, ``noise_fraction``, ``temperature_moves``,
    ``temperature_value_cutoff``, ``late_moves``, ``late_temperature``, ``policy_target``,
    ``forced_playouts``, ``policy_temperature``, ``opening_policy_temperature``,
    ``ply_simulations``, ``gumbel_considered``, ``cache``, ``network_copy`` and ``reuse``
    are read. Make one per collection: with ``cache`` its searches reuse the network's
    results for positions met before (`CachedEvaluator`), which is right only while the
    weights stay as they are; with ``network_copy`` they search a NumPy copy of the
    weights as they were when it was made (`Policy.frozen_evaluator`); with ``reuse``
    each search starts from the subtree its predecessor left below the move played
    (`TreeReuse`). ``pi`` is the policy target: the visit distribution, or the
    completed-Q policy (`completed_q_policy`); ``prior`` the network's root prior before
    any noise (policy surprise weighting, `.surprise`).
    """
    network = policy.search_settings(frozen=cfg.network_copy)

    def evaluator(temperature: float) -> Any:
        """The network's priors tempered (Leela's policy softmax temperature; 1: as they
        are), with ``cache`` kept for this controller's life: the weights do not change
        in it."""
        tempered = prior_tempered(network["evaluate"], temperature)
        return CachedEvaluator(NetworkEvaluator(tempered)) if cfg.cache else tempered

    settings = dict(
        c_puct=cfg.c_puct,
        dirichlet_alpha=cfg.dirichlet_alpha,
        noise_fraction=cfg.noise_fraction,
        forced_playouts=cfg.forced_playouts,  # only where a search adds root noise
        gumbel_considered=cfg.gumbel_considered,  # Gumbel AlphaZero's root (0: PUCT's)
        # its evaluator (with network_copy over a NumPy copy of the weights: they stay
        # as they are during a collection), value discount and moves-left utility
        **{**network, "evaluate": evaluator(cfg.policy_temperature)},
    )
    reuse = TreeReuse() if cfg.reuse else None  # each search starts from the last one's
    search = PUCTSearch(rules, simulations=cfg.simulations, **settings)
    second = cfg.second_player_simulations
    # the second player's searches (its moves at odd plies), when sized apart
    deep = None if second is None else PUCTSearch(rules, simulations=second, **settings)
    capped = cfg.full_fraction < 1.0  # playout cap randomisation
    fast = PUCTSearch(rules, simulations=cfg.fast_simulations, **settings) if capped else None
    # the sampled opening's searches, where the root noise's concentration or the policy
    # temperature is its own
    opening = None
    noisy = settings
    alpha, temp = cfg.opening_dirichlet_alpha, cfg.opening_policy_temperature
    alpha = cfg.dirichlet_alpha if alpha is None else alpha
    temp = cfg.policy_temperature if temp is None else temp
    if alpha != cfg.dirichlet_alpha or temp != cfg.policy_temperature:
        noisy = {**settings, "dirichlet_alpha": alpha}
        if temp != cfg.policy_temperature:
            noisy["evaluate"] = evaluator(temp)
        opening = (
            PUCTSearch(rules, simulations=cfg.simulations, **noisy),
            None if second is None else PUCTSearch(rules, simulations=second, **noisy),
        )

    schedule = [(int(p), int(n)) for p, n in cfg.ply_simulations or ()]  # [(ply, sims)]
    # the scheduled searches by (simulations, in the opening), made as first needed
    sized: dict[tuple[int, bool], PUCTSearch] = {}

    def act(planes: np.ndarray, masks: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        cur, mask = rules.from_planes(planes)
        training = policy.training
        policy.eval()  # once per search, not once per simulation
        ply = planes.reshape(len(planes), -1).sum(axis=1)  # stones on the board
        main, side = search, deep
        early = opening is not None and _in_opening(ply, cfg.temperature_moves)
        if early:
            main, side = opening
        n = simulations_at(ply, schedule, cfg.simulations)
        if n != cfg.simulations:  # this ply's size, with the opening's noise where it is
            if (n, early) not in sized:
                sized[n, early] = PUCTSearch(rules, simulations=n, **(noisy if early else settings))
            main = sized[n, early]
        if fast is None:
            res = _side_search(main, side, ply, cur, mask, rng, reuse)
            full = None
        else:
            full = rng.random(len(cur)) < cfg.full_fraction  # [n] searched in full
            res = _split_search(main, fast, cur, mask, full, rng)
        if training:
            policy.train()
        temperature = sampling_temperature(ply, cfg)  # [n]
        visits = decided_visits(res)  # where the search proved the root: its best moves
        if res.gumbel_move is not None:  # Gumbel AlphaZero's root: its move and target
            actions, pi, explored = gumbel_moves(res)
        else:
            if cfg.forced_playouts > 0:  # the forced visits out of the target and the move
                pruned = pruned_visits(visits, res, cfg.c_puct, cfg.forced_playouts)
                visits = pruned if full is None else np.where(full[:, None], pruned, visits)
            near = near_best_visits(visits, res.q, cfg.temperature_value_cutoff)
            actions = choose_moves(near, temperature, rng)  # sampled near the best
            # [n] a sampled move its search visited less than its most visited one
            played = visits[np.arange(len(actions)), actions]
            explored = (temperature > 0) & (played < visits.max(axis=1))
            if cfg.policy_target == "completed_q":
                pi = completed_q_policy(res)  # [n, A]
            else:
                pi = visits / visits.sum(axis=1, keepdims=True)  # [n, A]
        if reuse is not None:
            reuse.played(actions)
        out = {
            "pi": pi.astype(np.float32),
            "root_value": res.value.astype(np.float32),
            "prior": res.net_priors.astype(np.float32),  # [n, A] before noise (`.surprise`)
            "explored": explored,
        }
        if full is not None:
            out["full_search"] = full  # [n] bool: a training sample (`outcome_samples`)
        if res.decided is not None:  # [n] bool: root_value is the proof's exact value
            out["root_proven"] = res.decided
        return actions, out

    act.search = search  # type: ignore[attr-defined]  # the tree it plays with
    act.fast = fast  # type: ignore[attr-defined]  # and its fast searches (None: none)
    act.reuse = reuse  # type: ignore[attr-defined]  # the subtrees it keeps (None: none)
    # the opening's searches and the second player's there (None: the others throughout)
    act.opening = opening  # type: ignore[attr-defined]
    return act


def _side_search(
    search: PUCTSearch,
    second: PUCTSearch | None,
    ply: np.ndarray,
    cur: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    reuse: TreeReuse | None,
) -> SearchResult:
    """The training search of positions at ``ply [n]``: by ``second`` where the second
    player moves (odd plies) if it is given, else by ``search``. Games are played in
    lockstep, so one call's positions share a ply and one search runs."""
    odd = ply % 2 == 1
    if second is not None and odd.any() and not odd.all():
        raise ValueError("second_player_simulations: one call mixes both players' moves")
    by = second if second is not None and odd.any() else search
    return by.search(cur, mask, rng, noise=True, reuse=reuse)


def gumbel_moves(res: SearchResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A Gumbel root's training moves ``[n]``, policy targets ``[n, A]`` and ``explored
    [n]``: the moves sequential halving chose (at every ply: a sample of the improved
    policy, as the paper's self-play plays), and the completed-Q policy over the priors
    the search used (`completed_q_policy`). Where the search proved the root, both keep
    to the moves proven best (the target renormalised over them; a chosen move outside
    them gives way to the target's mode). ``explored``: a move other than the target's
    mode."""
    pi = completed_q_policy(res, prior=res.priors)
    actions = res.gumbel_move
    if res.decided is not None and res.decided.any():
        best = decided_visits(res) > 0  # [n, A] on decided rows: the moves proven best
        pi = np.where(~res.decided[:, None] | best, pi, 0.0)
        pi = pi / pi.sum(axis=1, keepdims=True)
        off = res.decided & ~best[np.arange(len(actions)), actions]
        actions = np.where(off, pi.argmax(axis=1), actions)
    return actions, pi, actions != pi.argmax(axis=1)


def _split_search(
    search: PUCTSearch,
    fast: PUCTSearch,
    cur: np.ndarray,
    mask: np.ndarray,
    full: np.ndarray,
    rng: np.random.Generator,
) -> SearchResult:
    """One result for all positions: those marked ``full`` searched by ``search`` with root
    noise (a Gumbel root: its Gumbel variables), the rest by ``fast`` without (KataGo's
    fast searches)."""
    parts = [
        (rows, s.search(cur[rows], mask[rows], rng, noise=noisy))
        for rows, s, noisy in (
            (np.flatnonzero(full), search, True),
            (np.flatnonzero(~full), fast, False),
        )  # fmt: skip
        if len(rows)
    ]
    first = parts[0][1]
    merged = {}
    for name, value in vars(first).items():
        if value is None:
            merged[name] = None
            continue
        out = np.zeros((len(cur), *value.shape[1:]), value.dtype)
        for rows, res in parts:
            out[rows] = getattr(res, name)
        merged[name] = out
    return SearchResult(**merged)


def alphazero_step(policy: Any, b: dict[str, np.ndarray], u: Any) -> dict[str, float]:
    """One gradient step: ``policy_coef`` x cross-entropy to the visit distribution +
    ``value_coef`` x MSE to the outcome (``u`` is ``arena.update``; a policy with
    ``value_bins``: x the cross-entropy to the outcome's HL-Gauss histogram, the MSE still
    logged as ``value_loss``); returns its metrics.
    With the samples' ``moves_left`` targets (a policy with the moves-left head) the loss
    adds ``value_coef`` x MSE of the predicted plies left, both divided by the board's
    squares (so in [0, 1], like the value's); with their ``opponent_pi`` (a policy with
    the opponent-policy head) ``opponent_policy_coef`` x the cross-entropy of the
    opponent's reply (KataGo's auxiliary target); with their ``ownership`` (a policy with the
    ownership head) ``ownership_coef`` x the cross-entropy of each cell's holder at the
    game's end, averaged over the cells (KataGo's ownership target); with the soft policy
    head ``soft_policy_coef`` x the cross-entropy of ``pi ** soft_policy_power``, renormalised."""
    out = policy.heads(
        b["obs"], moves_left="moves_left" in b, opponent="opponent_pi" in b,
        ownership="ownership" in b,
    )  # fmt: skip
    logits, value, plies = out["logits"], out["value"], out.get("moves_left")
    logp = policy.masked_log_probs(logits, b["mask"])  # [B, A], ~-1e9 on illegal moves
    pi = policy.to_tensor(b["pi"])
    policy_loss = -(pi * logp).sum(-1).mean()  # pi is 0 where a move is illegal
    z = policy.to_tensor(b["z"])  # [B]
    value_loss = ((value - z) ** 2).mean()  # logged for every head: comparable across runs
    extra: dict[str, float] = {}
    if "value_logits" in out:  # a classifier head: HL-Gauss cross-entropy in place of MSE
        target = hl_gauss_targets(z, policy.value_bins, policy.value_sigma)  # [B, bins]
        value_ce = -(target * F.log_softmax(out["value_logits"], axis=-1)).sum(-1).mean()
        loss = u.policy_coef * policy_loss + u.value_coef * value_ce
        extra["value_ce"] = float(value_ce)
    else:
        loss = u.policy_coef * policy_loss + u.value_coef * value_loss
    if plies is not None:
        scale = 1.0 / float(policy.max_plies)
        target = policy.to_tensor(b["moves_left"])
        moves_left_loss = (((plies - target) * scale) ** 2).mean()
        loss = loss + u.value_coef * moves_left_loss
        extra["moves_left_loss"] = float(moves_left_loss)
    if "opponent_logits" in out:  # [B, A]: every action, the reply's own mask unknown here
        opp_logp = F.log_softmax(out["opponent_logits"], axis=-1)
        opp_loss = -(policy.to_tensor(b["opponent_pi"]) * opp_logp).sum(-1).mean()
        loss = loss + u.opponent_policy_coef * opp_loss
        extra["opponent_policy_loss"] = float(opp_loss)
    if "ownership_logits" in out:  # [B, rows, cols, 3]
        own_logp = F.log_softmax(out["ownership_logits"], axis=-1)
        own_loss = -(policy.to_tensor(b["ownership"]) * own_logp).sum(-1).mean()
        loss = loss + u.ownership_coef * own_loss
        extra["ownership_loss"] = float(own_loss)
    if "soft_logits" in out:  # [B, A]: KataGo's soft policy target, the visits flattened
        soft = powered(b["pi"], u.soft_policy_power, np.float32)  # [B, A]; 0 stays 0
        soft_logp = policy.masked_log_probs(out["soft_logits"], b["mask"])
        soft_loss = -(policy.to_tensor(soft) * soft_logp).sum(-1).mean()
        loss = loss + u.soft_policy_coef * soft_loss
        extra["soft_policy_loss"] = float(soft_loss)
    policy.update(loss)
    p = logp.exp()
    entropy = -(p * logp).sum(-1).mean()
    return {
        "loss": float(loss),
        "policy_loss": float(policy_loss),
        "value_loss": float(value_loss),
        "entropy": float(entropy),
        **extra,
    }
