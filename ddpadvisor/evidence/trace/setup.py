"""Configuration as the job ran it: world, precision, optimizer, wrapped model, loads."""

from __future__ import annotations

from ddpadvisor.evidence.trace.common import _mode, _odd_ranks, _ranks_text
from ddpadvisor.evidence.trace.context import Context


class SetupReader(Context):
    """Configuration as the job ran it: world, precision, optimizer, wrapped model, loads."""

    def setup(self) -> None:
        r0 = self.r0
        backend = r0.start.get("backend")
        self.add("world_size", self.world, detail=f"{self.world} ranks ({backend})")
        if r0.start.get("torch"):
            self.add("torch_version", str(r0.start["torch"]))
        wrap = r0.first("wrap")
        if wrap is not None:
            bn = wrap.get("batchnorm") or []
            self.add("has_batchnorm", bool(bn), detail=f"module types: {', '.join(bn) or 'none'}")
            if bn:
                self.add("uses_syncbn", any("SyncBatchNorm" in b for b in bn))
            if wrap.get("n_buffers"):
                off = not wrap.get("forward_sync_buffers", True)
                self.add(
                    "broadcast_buffers_disabled",
                    off,
                    detail="DDP was built with broadcast_buffers=False" if off else None,
                )
            names = self._param_names()
            lora = [n for n in names if "lora" in n.lower()]
            self.add("uses_lora", bool(lora), detail=f"e.g. {lora[0]}" if lora else None)
            dtypes = wrap.get("dtypes") or []
            autocast = [
                r.get("autocast") for t in self.ranks for r in t.kind("cfg") if r.get("autocast")
            ]
            if "float16" in dtypes and "float32" not in dtypes:
                self.add("precision", "pure_fp16", detail="the wrapped parameters are float16")
            elif "bfloat16" in dtypes and "float32" not in dtypes:
                self.add("precision", "pure_bf16", detail="the wrapped parameters are bfloat16")
            elif "float16" in autocast:
                self.add("precision", "fp16_amp", detail="autocast to float16 with float32 weights")
            elif "bfloat16" in autocast:
                self.add(
                    "precision", "bf16_amp", detail="autocast to bfloat16 with float32 weights"
                )
            elif self.common_steps:
                self.add("precision", "fp32", detail="no autocast seen; float32 weights")
        self._lost_updates()
        if self.common_steps:
            scaler = any(r.get("scaler") for r in self._cfg())
            self.add("uses_grad_scaler", scaler)
            compiled = any(r.get("compile") for r in self._cfg())
            self.add("uses_torch_compile", compiled)
        opt = r0.first("opt")
        if opt is not None:
            outer = str(opt.get("cls", ""))
            inner = opt.get("inner")
            # a wrapper (ZeroRedundancyOptimizer, a Lookahead) steps the optimizer it holds:
            # that one's update rule is the run's
            cls = str(inner) if isinstance(inner, str) and inner else outer
            family = "adam" if "adam" in cls.lower() else "sgd" if cls == "SGD" else "other"
            self.add(
                "optimizer_family", family, detail=cls if cls == outer else f"{cls} in {outer}"
            )
            betas = (opt.get("hp") or {}).get("betas")
            if family == "adam" and isinstance(betas, list) and len(betas) == 2:
                self.add("adam_beta2", float(betas[1]), detail=f"{cls} betas={betas}")
        sizes = [r.get("bs") for r in r0.steps.values() if isinstance(r.get("bs"), int)]
        if sizes:
            self.add(
                "per_gpu_batch_size", _mode(sizes), detail="batch dimension of the forward input"
            )
        regs = [(t.rank, r) for t in self.ranks for r in t.kind("reg")]
        if self.ddp:
            if regs:
                rank, r = regs[0]
                self.add(
                    "module_created_after_wrap",
                    True,
                    where=f"rank {rank} step {r.get('s')}",
                    detail=f"{r.get('kind')} '{r.get('name')}' ({r.get('cls')}) was added to the "
                    f"wrapped model after DistributedDataParallel was built"
                    + (f"; {len(regs) - 1} more" if len(regs) > 1 else ""),
                )
            else:
                self.add("module_created_after_wrap", False)
            self._loads()
        elif self.deepspeed is not None:
            self._loads()  # the engine's module took the wrapper's place

    def _param_names(self) -> list[str]:
        for t in self.ranks:
            for chk in [*t.checks.values(), *([t.final] if t.final else [])]:
                if chk.get("params_names"):
                    return list(chk["params_names"])
        return []

    def _loads(self) -> None:
        per_rank = {
            t.rank: [
                (r.get("kind"), r.get("s"))
                for r in t.kind("load")
                if r.get("after_wrap") and r.get("wrapped")
            ]
            for t in self.ranks
        }
        if len(per_rank) < 2:
            return
        odd = _odd_ranks(per_rank)
        if not odd:
            # Only load_state_dict is watched; weights changed in place on some ranks are not
            # seen here (the replica checksums see their effect), so no "false" is measured.
            return
        loaders = [r for r, v in per_rank.items() if v]
        idle = [r for r, v in per_rank.items() if not v]
        kinds = sorted({str(k) for v in per_rank.values() for k, _ in v})
        step = next((s for v in per_rank.values() for _, s in v), 0)
        self.add(
            "rank_conditional_state_change",
            True,
            where=f"rank {loaders[0] if loaders else odd[0]} step {step}",
            detail=f"{_ranks_text(loaders)} loaded {'/'.join(map(str, kinds))} state into the wrapped "
            f"job after wrapping"
            + (f"; {_ranks_text(idle)} did not" if idle else "; the ranks did it differently"),
        )
        # which state the ranks loaded differently: the trained weights or their optimizer's
        # state, or only something else (a GradScaler's)
        per_kind = [{str(k) for k, _ in v} for v in per_rank.values()]
        differ = set[str]().union(*per_kind) - per_kind[0].intersection(*per_kind[1:])
        weights = sorted(differ & {"model", "optimizer"})
        self.add(
            "weights_loaded_on_some_ranks",
            bool(weights),
            where=f"rank {loaders[0] if loaders else odd[0]} step {step}",
            detail=f"{'/'.join(weights)} state loaded on some ranks only"
            if weights
            else f"only {'/'.join(sorted(differ)) or 'the order of'} state differs in what the "
            "ranks loaded; the weights and optimizer state were loaded alike",
        )

    def _lost_updates(self) -> None:
        """Sampled float16/bfloat16 weights the optimizer stepped in place (``lowp``: rounded
        away, sampled): the share whose update left the stored value unchanged although the
        gradient was non-zero."""
        lost = sampled = 0
        for t in self.ranks:
            for r in t.steps.values():
                pair = r.get("lowp")
                if (
                    isinstance(pair, list)
                    and len(pair) == 2
                    and all(isinstance(x, int) for x in pair)
                ):
                    lost += pair[0]
                    sampled += pair[1]
        if not sampled:
            return
        share = lost / sampled
        self.add(
            "low_precision_updates_lost",
            round(share, 4),
            detail=f"{lost} of {sampled} sampled updates of float16/bfloat16 weights left the "
            "weight unchanged (the update was smaller than half the weight's last bit)",
        )
