"""Policy-gradient training (rl/methods.py: GGPO, GRPO, GSPO, GPPO, AEPO, ADORA) on accelerate, CPU to many GPUs.

    vimrag train --config rl/configs/tiny_cpu.yaml                         # a few updates of a tiny model
    vimrag train --config rl/configs/qwen2_5_vl_7b_ggpo.yaml lr=5e-7 group_size=8
    accelerate launch --config_file rl/configs/accelerate/ddp.yaml -m app.cli train --config ...

One update: take the next `questions_per_update` questions (split across processes), sample
`group_size` trajectories each through the real agent loop (rl/rollout.py), score them, normalise
rewards within each group and reshape them per the method, mask steps by the graph (GGPO), and optimize the
clipped surrogate over every step segment's generated tokens (rl/loss.py): `ppo_epochs` passes over the batch in
mini-batches of `mini_batch_size` trajectories, one optimizer step each, as verl does (rl/update.py; the default is
one step on the whole batch). Observation tokens are context only. Groups may branch (ARPO / AEPO) and the step
cap may follow a curriculum.
Rollouts sample with the model being trained (`rollout: local`), or on a vLLM server that hot-loads each
update's LoRA adapter (`rollout: served`, rl/served.py).

Loss normalisation (`length_norm`): "token_mean" averages over every generated token of the mini-batch on
all processes (each token weighs the same); "seq_mean" averages within each segment, then over
segments. Segments are forwarded one at a time (memory stays flat with long multimodal prompts) and
their losses are scaled so the summed gradient equals that of the whole batch at once; every process
runs the same number of micro-steps (padded with zero-weight segments) so DDP, FSDP and DeepSpeed stay
in step, and the gradient of a 2-process run equals a 1-process run on the doubled batch.

Checkpoints (`save_every`) hold the model (or LoRA adapter), optimizer, scheduler, RNG states and the
data position; training resumes from the newest one in `output_dir` and continues exactly.
Metrics go to `output_dir/metrics.jsonl`, to TensorBoard (`tensorboard` installed) and to wandb
(installed, and listed in `log_with`). The settings and their help are `TrainConfig` (rl/config.py).
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import replace
from pathlib import Path

import torch

from agent.config import flatten
from rl.config import TrainConfig
from rl.policy import load_model, make_policy
from rl.update import Piece, reduce_sums, update_policy

logger = logging.getLogger(__name__)
GAP_WARN = 0.1  # mean |served - local| log-prob per token that earns a warning (a judgement call, not measured on GPUs)


# -- the trainer ------------------------------------------------------------------------------------
class Trainer:
    def __init__(self, cfg: TrainConfig, agent_retriever=None) -> None:
        from accelerate import Accelerator
        from accelerate.utils import DistributedDataParallelKwargs, ProjectConfiguration, set_seed

        self.cfg = cfg
        self.out = Path(cfg.output_dir)
        mp = cfg.mixed_precision
        if mp == "auto":
            mp = "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no"
        trackers = [t for t in cfg.log_with if _tracker_available(t)]
        self.acc = Accelerator(
            cpu=not torch.cuda.is_available(),  # so that CPU processes under accelerate launch join (gloo)
            mixed_precision=mp,
            gradient_accumulation_steps=cfg.grad_accum,
            log_with=trackers or None,
            project_config=ProjectConfiguration(project_dir=str(self.out), logging_dir=str(self.out / "logs")),
            # a VLM step without an image leaves the vision tower out of the graph; DDP must not wait for its grads
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)],
        )
        set_seed(cfg.seed)
        from eval.datasets import load_dataset

        self.ds = load_dataset(cfg.dataset, corpus=cfg.corpus)
        self.retriever = agent_retriever
        model, self.proc, self.is_vl = load_model(cfg)
        self.ref_model = None
        if cfg.kl_coef > 0:
            self.ref_model, _, _ = load_model(replace(cfg, lora=None))
            self.ref_model.eval().requires_grad_(False)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda u: min(1.0, (u + 1) / cfg.warmup_updates) if cfg.warmup_updates else 1.0
        )
        self.model, self.opt, self.sched = self.acc.prepare(model, opt, sched)
        if self.ref_model is not None:
            self.ref_model.to(self.acc.device)
        self.client = self.sync = None
        if cfg.rollout == "served":
            from rl.served import AdapterSync, make_client

            self.client = make_client(cfg.rollout_url, cfg.rollout_api_key)
            self.sync = AdapterSync(self.client, self.out / "served_adapters", keep_old=cfg.rollout_mode == "async")
        self.update = 0
        self.pipe = None  # the async rollout threads (rl/pipeline.py), started by the first update
        self.t_started: float | None = None
        self.first_update = 0
        self.dropped_total = 0
        self.order: list[int] = []
        self.pos = 0
        self.epoch = 0
        if trackers and self.acc.is_main_process:
            self.acc.init_trackers("vimrag-train", config={k: str(v) for k, v in flatten(cfg.to_dict()).items()})
        self.out.mkdir(parents=True, exist_ok=True)
        if self.acc.is_main_process:
            (self.out / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
        if cfg.resume:
            self.try_resume()

    # data order: a seeded permutation per epoch; the position is part of the checkpoint
    def next_items(self, n: int):
        items = []
        while len(items) < n:
            if self.pos >= len(self.order):
                rng = random.Random(self.cfg.seed * 1000 + self.epoch)
                self.order = list(range(len(self.ds.items)))
                rng.shuffle(self.order)
                self.pos, self.epoch = 0, self.epoch + 1
            items.append(self.ds.items[self.order[self.pos]])
            self.pos += 1
        return items

    def get_retriever(self):
        if self.retriever is None:
            from eval.runner import ensure_index
            from retrieval.retriever import Retriever, open_retriever

            if self.cfg.search_url:  # a search server holds the corpus; nothing to build here
                self.retriever = open_retriever(search_url=self.cfg.search_url)
                return self.retriever
            with self.acc.main_process_first():  # one process builds or updates the index, the others read it
                self.retriever = Retriever(ensure_index(self.ds, self.cfg.index, progress=False))
        return self.retriever

    def agent_config(self, item):
        from agent.protocols import read_prompt_file

        agent = self.cfg.agent
        prompts = dict(agent.prompts)
        if self.cfg.prompt_file:
            prompts.update(read_prompt_file(self.cfg.prompt_file, agent.protocol, self.cfg.prompt_role))
        max_steps = agent.max_steps
        if self.cfg.horizons:  # ScalingInter-RL: this update's stage of the horizon schedule
            from rl.curriculum import horizon

            max_steps = horizon(self.update + 1, self.cfg.horizons, self.cfg.horizon_every)
        docs = [item.doc] if self.ds.per_doc and item.doc else agent.docs
        return replace(agent, docs=docs, prompts=prompts, max_steps=max_steps)

    def group_fn(self):
        """How one question's group is sampled this update (rl/rollout.py `group_sampler`)."""
        from rl.rollout import group_sampler

        return group_sampler(self.cfg, self.get_retriever, len(getattr(self.proc, "tokenizer", self.proc)), self.update)

    def push_adapter(self, version: int) -> None:
        """Load version `version`'s LoRA adapter into the rollout server (collective: every process calls it, and
        every process raises if the main one could not load it)."""
        from agent.backends.base import PolicyError

        acc = self.acc
        state = acc.get_state_dict(self.model)  # collective: sharded weights (FSDP, ZeRO-3) are gathered
        error = None
        if acc.is_main_process:
            try:
                self.sync.push(acc.unwrap_model(self.model), version, state)
            except PolicyError as e:
                error = e
        # collective, so every process samples from the adapter just loaded, or every process stops
        loaded = acc.gather(torch.tensor([0.0 if error else 1.0], device=acc.device)).min()
        if error is not None:
            raise error
        if loaded < 1:
            raise PolicyError(
                "the main process could not load this update's adapter into the rollout server; its error says why"
            )

    def sync_groups(self) -> tuple[list, list[float]]:
        """This update's groups, sampled now with the weights it starts from: (groups, served log-prob gaps)."""
        from rl.rollout import rollout_concurrent

        cfg, acc = self.cfg, self.acc
        items = self.next_items(cfg.questions_per_update)
        mine = items[acc.process_index :: acc.num_processes]
        jobs = [(item, self.agent_config(item)) for item in mine]
        retriever = self.get_retriever()
        policy = make_policy(acc.unwrap_model(self.model), self.proc, self.is_vl, cfg)
        if cfg.lockstep:
            from rl.rollout import rollout_lockstep

            return rollout_lockstep(policy, retriever, jobs, cfg.group_size, cfg.reward), []
        if cfg.rollout != "served":
            return [self.group_fn()(policy, item, acfg) for item, acfg in jobs], []
        from rl.served import ServedPolicy, adapter_name

        self.push_adapter(self.update)
        self.model.eval()  # set once: the threads below must not toggle train/eval under each other
        served = [
            ServedPolicy(policy, self.client, adapter_name(self.update))
            for _ in range(max(1, min(cfg.rollout_workers, len(jobs) * cfg.group_size)))
        ]
        branched = self.group_fn() if cfg.branching != "none" else None
        groups = rollout_concurrent(served, retriever, jobs, cfg.group_size, cfg.reward, group=branched)
        return groups, [g for p in served for g in p.gaps]

    def start_pipeline(self):
        """The async rollout threads (rl/pipeline.py), sampling from snapshots of the weights (served: from the
        adapter of the snapshot's version, the snapshot rebuilding the log-probs). Each process runs its own, on its
        share of every update's questions, walking the same data order as every other process."""
        import copy
        import threading
        from concurrent.futures import ThreadPoolExecutor

        from rl.pipeline import Pipeline
        from rl.rollout import group_sampler, rollout_one

        cfg, acc = self.cfg, self.acc
        world, rank = acc.num_processes, acc.process_index
        per_update = len(range(rank, cfg.questions_per_update, world))
        if per_update < 1:
            raise ValueError(
                f"questions_per_update={cfg.questions_per_update} leaves process {rank} of {world} without a question"
            )
        vocab = len(getattr(self.proc, "tokenizer", self.proc))
        local = threading.local()  # one processor per thread: a fast tokenizer must not be shared by threads
        jobs = {"n": 0}

        def next_job():  # under the pipeline's lock: the same order as a synchronous run
            k = jobs["n"] % per_update  # this process's k-th question of an update
            if k == 0:
                items = self.next_items(cfg.questions_per_update)
                jobs["mine"] = items[rank::world]
            jobs["n"] += 1
            item = jobs["mine"][k]
            return item, self.agent_config(item)

        def policy_for(model, version: int):
            if not hasattr(local, "proc"):
                local.proc = copy.deepcopy(self.proc)
            policy = make_policy(model, local.proc, self.is_vl, cfg)
            if cfg.rollout == "served":  # the server samples; the snapshot rebuilds the log-probs
                from rl.served import ServedPolicy, adapter_name

                policy = ServedPolicy(policy, self.client, adapter_name(version))
            return policy

        def sampled(policy, result):
            if cfg.rollout == "served":
                with self._gap_lock:
                    self._gaps += policy.gaps
            return result

        def one(model, version: int, job):  # one trajectory, on a trajectory thread
            policy = policy_for(model, version)
            return sampled(policy, rollout_one(policy, self.get_retriever(), job[0], job[1], cfg.reward))

        def sample(model, version: int, job):
            if cfg.branching != "none":  # a branched group grows from its own earlier trajectories: one thread
                policy = policy_for(model, version)
                return sampled(policy, group_sampler(cfg, self.get_retriever, vocab, version)(policy, *job))
            # a group's trajectories are independent: they run at once, each on a thread of its own
            return list(self._traj_pool.map(lambda _: one(model, version, job), range(cfg.group_size)))

        self.get_retriever()  # built (or opened) once, before the threads share it
        self._gap_lock, self._gaps = threading.Lock(), []
        self._traj_pool = ThreadPoolExecutor(cfg.rollout_workers * cfg.group_size, thread_name_prefix="trajectory")
        pipe = Pipeline(sample, next_job, per_update, cfg.max_staleness, cfg.rollout_workers)
        self.publish(pipe)
        return pipe

    def publish(self, pipe) -> None:
        """Hand the rollout threads the weights of version `self.update`. Served: load its adapter first, and
        unload the adapters no thread on any process samples from any more (collective)."""
        acc = self.acc
        if self.cfg.rollout == "served":
            self.push_adapter(self.update)
        pipe.publish(self.update, acc.unwrap_model(self.model))
        if self.cfg.rollout == "served":
            oldest = acc.gather(torch.tensor([pipe.oldest_in_use()], device=acc.device)).min().item()
            if acc.is_main_process:
                self.sync.prune(int(oldest))

    def async_groups(self):
        """This update's groups from the rollout threads: (groups, served log-prob gaps, the take's TakeInfo)."""
        if self.pipe is None:
            self.pipe = self.start_pipeline()
        ready, info = self.pipe.take(self.update)
        with self._gap_lock:
            gaps, self._gaps = self._gaps, []
        return [r.group for r in ready], gaps, info

    def step(self) -> dict[str, float]:
        """One update: rollouts on this process's share of questions (or the async threads' next batch), then
        its optimizer steps (rl/update.py)."""
        from rl.curriculum import horizon
        from rl.ggpo import dead_end_searches, mask_report, mask_shares
        from rl.methods import segment_advantages, segment_weights

        cfg, acc = self.cfg, self.acc
        t0 = time.perf_counter()
        if self.t_started is None:
            self.t_started, self.first_update = t0, self.update
        info = None
        if cfg.rollout_mode == "async":
            groups, gaps, info = self.async_groups()
        else:
            groups, gaps = self.sync_groups()
        shaped = segment_advantages(groups, cfg, getattr(self.proc, "tokenizer", self.proc))
        lessons, mel = {}, {}
        if cfg.mel:  # Meta-Experience Learning: a lesson per group with a success and a failure (rl/mel.py)
            from rl.mel import lesson_targets

            lessons, mel = lesson_targets(self, groups)
        pieces, rewards, masked, steps, dead_ends, at, episodes = [], [], 0, 0, 0, 0, []
        for trajs in groups:
            for t in trajs:
                w = segment_weights(cfg.method, t.masks, cfg.step_mask).tolist()
                masked += sum(1 for x in w if x == 0.0)
                valid = {s.node_id for s in t.segments if s.gold_hit}
                episodes.append((t.reward, [s.node_id for s in t.segments], t.trace.graph, valid, w))
                pieces.append(Piece(t.segments, shaped.values[at : at + len(t.segments)], w, lessons.get(id(t))))
                at += len(t.segments)
                rewards.append(t.reward)
                steps += len(t.trace.steps)
                dead_ends += dead_end_searches(t.trace.graph)
        segs = [s for p in pieces for s in p.segments]
        t_roll = time.perf_counter() - t0
        self.model.train()
        upd = update_policy(
            acc,
            self.model,
            self.opt,
            pieces,
            cfg,
            self.ref_model,
            version=self.update,
            seed=cfg.seed * 100_003 + self.update,
        )
        self.sched.step()  # once per update, as verl steps it (rl/update.py)
        self.update += 1
        if self.pipe is not None:  # the rollout threads sample from the new weights from now on
            self.publish(self.pipe)
        t_upd = time.perf_counter() - t0 - t_roll
        n_tok = sum(int(s.gen_ids.numel()) for s in segs)
        pipeline = {}
        if info is not None:  # how stale what was trained on was, and what was dropped for being staler
            pipeline = {f"staleness_{k}": info.staleness.count(k) for k in range(cfg.max_staleness + 1)}
            pipeline["dropped"] = info.dropped
        r = reduce_sums(
            acc,
            {
                **pipeline,
                "reward": sum(rewards),
                "trajectories": len(rewards),
                "tokens": n_tok,
                "segments": len(segs),
                "masked": masked,
                "steps": steps,
                "dead_ends": dead_ends,
                "logp_gap": sum(gaps),
                "gap_tokens": len(gaps),
                "groups": len(groups),
                "attenuated": shaped.attenuated_groups,
                "tool_tokens": shaped.tool_tokens,
                "clip_sum": upd.clip_sum,
                "ratio_sum": upd.ratio_sum,
                "kl_sum": upd.kl_sum,
                "counted": upd.counted,
                **mask_report(episodes),
                **({**mel, "mel_nll": upd.mel_nll, "mel_tokens": upd.mel_tokens} if cfg.mel else {}),
            },
        )
        ratio_max = acc.gather(torch.tensor([upd.ratio_max], device=acc.device)).max().item()
        n_traj = max(1.0, r["trajectories"])
        log = {
            "update": self.update,
            "processes": acc.num_processes,
            "reward": r["reward"] / n_traj,
            "loss": upd.loss,
            "optimizer_steps": upd.optimizer_steps,
            # over every segment of every optimizer step, all processes: the share the clip acted on
            "clip_frac": r["clip_sum"] / max(1.0, r["counted"]),
            "ratio_mean": r["ratio_sum"] / max(1.0, r["counted"]),
            "ratio_max": ratio_max,
            "kl": r["kl_sum"] / max(1.0, r["counted"]),
            "segments": int(r["segments"]),
            "masked_fraction": r["masked"] / max(1.0, r["segments"]),
            "tokens": int(r["tokens"]),
            "steps": r["steps"] / n_traj,
            "dead_end_searches": r["dead_ends"] / n_traj,
            **mask_shares(r),  # GGPO's masks by outcome and kind, dead ends per successful episode
            "rollout_s": round(t_roll, 3),
            "update_s": round(t_upd, 3),
            "tokens_per_s": r["tokens"] / max(1e-9, t_roll + t_upd),
            # the share of this update's wall time the trainer waited for rollouts instead of training
            "idle_share": t_roll / max(1e-9, t_roll + t_upd),
            "updates_per_hour": 3600
            * (self.update - self.first_update)
            / max(1e-9, time.perf_counter() - self.t_started),
            "lr": self.sched.get_last_lr()[0],
        }
        if info is not None:
            hist = [int(r[f"staleness_{k}"]) for k in range(cfg.max_staleness + 1)]
            self.dropped_total += int(r["dropped"])
            log.update({f"staleness_{k}": c for k, c in enumerate(hist)})  # the histogram, one scalar per bar
            log.update(
                staleness_mean=sum(k * c for k, c in enumerate(hist)) / max(1, sum(hist)),
                dropped=int(r["dropped"]),
                dropped_total=self.dropped_total,
            )
        if cfg.mel:  # pairs reflected on, lessons kept and pairs skipped; the lessons' NLL per token
            log.update({k: int(r[k]) for k in ("mel_pairs", "mel_lessons", "mel_skipped")})
            log["mel_nll"] = r["mel_nll"] / max(1.0, r["mel_tokens"])
        if cfg.horizons:
            log["horizon"] = horizon(self.update, cfg.horizons, cfg.horizon_every)
        if cfg.method == "adora":
            log["adora_attenuated"] = r["attenuated"] / max(1.0, r["groups"])  # share of groups scaled by lambda
        if cfg.tool_advantage:
            log["tool_token_share"] = r["tool_tokens"] / max(1.0, r["tokens"])
        if cfg.rollout == "served":
            log["served_logp_gap"] = r["logp_gap"] / max(1.0, r["gap_tokens"])
            if log["served_logp_gap"] > GAP_WARN and acc.is_main_process:
                logger.warning(
                    "update %d: the rollout server's log-probs differ from the trainer's by %.3f per "
                    "token; check that it loaded the adapter and uses the same processor settings",
                    self.update,
                    log["served_logp_gap"],
                )
        if acc.is_main_process:
            with open(self.out / "metrics.jsonl", "a") as f:
                f.write(json.dumps(log) + "\n")
        acc.log(log, step=self.update)
        if cfg.save_every and self.update % cfg.save_every == 0:
            self.save()
        return log

    def train(self, progress: bool = True) -> list[dict[str, float]]:
        from tqdm.auto import tqdm

        logs = []
        bar = tqdm(
            total=self.cfg.updates,
            initial=self.update,
            desc=f"{self.cfg.method} updates",
            disable=not (progress and self.acc.is_main_process),
        )
        while self.update < self.cfg.updates:
            log = self.step()
            logs.append(log)
            bar.update(1)
            bar.set_postfix(reward=f"{log['reward']:.2f}", loss=f"{log['loss']:.3f}")
        bar.close()
        if self.pipe is not None:
            self.pipe.close()  # its threads finish the groups they are sampling, then stop
            self._traj_pool.shutdown(cancel_futures=True)
            self.pipe = None
        if self.cfg.save_every and self.update % self.cfg.save_every:
            self.save()
        self.acc.end_training()
        return logs

    # -- checkpoints --------------------------------------------------------------------------------
    def save(self) -> Path:
        ckpt = self.out / f"checkpoint-{self.update:06d}"
        self.acc.save_state(str(ckpt))
        if self.acc.is_main_process:
            # accelerate's save_state already holds the model, optimizer, scheduler and every RNG state
            state = {"update": self.update, "pos": self.pos, "epoch": self.epoch, "order": self.order}
            (ckpt / "trainer_state.json").write_text(json.dumps(state))
        self.acc.wait_for_everyone()
        return ckpt

    def try_resume(self) -> bool:
        ckpts = sorted(self.out.glob("checkpoint-*"))
        if not ckpts:
            return False
        ckpt = ckpts[-1]
        self.acc.load_state(str(ckpt))
        state = json.loads((ckpt / "trainer_state.json").read_text())
        self.update, self.pos, self.epoch, self.order = state["update"], state["pos"], state["epoch"], state["order"]
        if self.acc.is_main_process:
            print(f"resumed from {ckpt} at update {self.update}")
        return True


def _tracker_available(name: str) -> bool:
    import importlib.util

    mod = {"tensorboard": "tensorboard", "wandb": "wandb"}.get(name, name)
    return importlib.util.find_spec(mod) is not None
