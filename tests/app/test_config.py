"""The one config system (agent/config.py): nested dataclasses to and from dicts, YAML with `key=value`
overrides, errors that name the key, help on every field shown by the generated flags, and the resolved config
written with an eval run and with each question the demo answers."""

import json
from dataclasses import fields

import pytest

from agent.backends.base import PolicyConfig
from agent.config import add_command, args_to_dict, field_help, from_args, load, setting, setting_like, to_dict
from agent.settings import AgentConfig
from app.cli import build_parser, main
from app.settings import DemoConfig, apply_form
from eval.runner import JudgeConfig, RunConfig
from retrieval.ingest import IngestConfig
from rl.config import SFTConfig, TrainConfig
from rl.experiment import ExperimentConfig

CONFIGS = [AgentConfig, PolicyConfig, RunConfig, JudgeConfig, TrainConfig, SFTConfig, IngestConfig, DemoConfig]
CONFIGS += [ExperimentConfig]  # rl.experiment's own command line
# which configs each command's flags are generated from
COMMANDS = {
    "train": [TrainConfig],
    "sft": [SFTConfig],
    "eval": [RunConfig],
    "demo": [DemoConfig],
    "ask": [PolicyConfig, AgentConfig],
    "index": [IngestConfig],
}


def test_nested_configs_round_trip_through_dicts_and_json():
    cfg = RunConfig(
        dataset="jsonl:q.jsonl",
        policy=PolicyConfig(backend="openai", model="m", api_key="sk-1", temperature=0.7),
        agent=AgentConfig(protocol="vrag", top_k=2, docs=["a.pdf"], prompts={"system": "Be brief."}),
        judge=JudgeConfig(base_url="http://judge/v1", model="j"),
        limit=5,
    )
    d = json.loads(json.dumps(cfg.to_dict(redact=False)))
    assert d["policy"]["model"] == "m" and d["agent"]["max_steps"] == 11  # vrag's own, resolved
    assert RunConfig.from_dict(d) == cfg
    train = TrainConfig(model="m", dataset="demo", agent=AgentConfig(max_steps=3), lora={"r": 4}, log_with=[])
    assert TrainConfig.from_dict(json.loads(json.dumps(train.to_dict()))) == train
    demo = DemoConfig(workdir="w", policy=PolicyConfig(backend="transformers", model="p"))
    assert DemoConfig.from_dict(demo.to_dict()) == demo
    # secrets are masked in what is saved, never in the object
    assert cfg.to_dict()["policy"]["api_key"] == "***" and cfg.to_dict()["judge"]["api_key"] == ""
    assert TrainConfig(rollout_api_key="k").to_dict()["rollout_api_key"] == "***"


def test_yaml_then_overrides_then_values(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("dataset: demo\nlimit: 3\npolicy: {backend: openai, model: a}\nagent:\n  top_k: 2\n")
    cfg = load(RunConfig, path, ["policy.model=b", "agent.max_steps=4", "policy.temperature=5e-1", "out=007"])
    assert cfg.policy == PolicyConfig(backend="openai", model="b", temperature=0.5)
    assert (cfg.agent.top_k, cfg.agent.max_steps, cfg.limit, cfg.out) == (2, 4, 3, "007")  # text stays text
    cfg = load(RunConfig, path, ["limit=9"], {"limit": 1, "agent": {"top_k": 5}})
    assert (cfg.limit, cfg.agent.top_k, cfg.policy.model) == (1, 5, "a")
    train = TrainConfig.load(None, ["model=m", "dataset=d", "lr=5e-7", "agent.top_k=2", "log_with=[wandb]"])
    assert train.lr == 5e-7 and train.agent.top_k == 2 and train.log_with == ["wandb"]


def test_errors_name_the_key_the_reason_and_the_valid_ones(tmp_path):
    with pytest.raises(
        ValueError, match=r"unknown policy settings \['policy.modle'\]; did you mean \['policy.model'\]"
    ):
        load(RunConfig, None, ["policy.modle=x"])
    with pytest.raises(ValueError, match=r"known ones are \[.*'policy.base_url'"):
        RunConfig.from_dict({"policy": {"modle": "x"}})
    with pytest.raises(ValueError, match=r"unknown run settings \['protocol'\]"):
        RunConfig.from_dict({"protocol": "vrag"})  # the protocol is the agent's setting now
    with pytest.raises(ValueError, match=r"agent.top_k='many' is not a number \(int\)"):
        load(RunConfig, None, ["agent.top_k=many"])
    with pytest.raises(ValueError, match=r"agent.top_k=2.5: expected a whole number"):
        load(RunConfig, None, ["agent.top_k=2.5"])
    with pytest.raises(ValueError, match=r"scope='everywhere' is not one of \['auto', 'doc', 'corpus'\]"):
        load(RunConfig, None, ["scope=everywhere"])
    with pytest.raises(ValueError, match="policy.backend='gpt' is not one of"):
        RunConfig.from_dict({"policy": {"backend": "gpt"}})
    with pytest.raises(ValueError, match="limit is a single setting, not a group"):
        load(RunConfig, None, ["limit.max=1"])
    with pytest.raises(ValueError, match="must look like key=value"):
        load(RunConfig, None, ["limit"])
    with pytest.raises(ValueError, match="log_with='wandb': expected a list"):
        TrainConfig.from_dict({"log_with": "wandb"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="bad.yaml must hold a mapping"):
        load(RunConfig, bad)
    with pytest.raises(FileNotFoundError, match="nope.yaml does not exist"):
        load(RunConfig, tmp_path / "nope.yaml")


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_has_help(cls):
    helps = field_help(cls)
    assert helps and all(len(h) > 10 for h in helps.values()), [k for k, h in helps.items() if len(h) <= 10]
    assert all(f.metadata.get("help") for f in fields(cls))  # nested fields name their group too


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_shows_every_field_generated_from_the_dataclasses(command, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")  # one line per flag: the help text is compared whole
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for cls in COMMANDS[command]:
        for key, text in field_help(cls).items():
            assert " ".join(text.split()) in out, f"vimrag {command} --help lacks {cls.__name__}.{key}"


def test_setting_declares_a_field_with_its_help_and_setting_like_borrows_one():
    f = setting(2, "retries on 5xx", aliases=["r"])
    assert (f.default, dict(f.metadata)) == (2, {"help": "retries on 5xx", "aliases": ["r"]})
    assert setting(factory=list, help="ids").default_factory() == []
    with pytest.raises(TypeError, match=r"unknown metadata \['alias'\]; valid: .*'aliases'"):
        setting(2, "retries", alias=["r"])
    # the experiment's settings that it hands to the trainer are described by the trainer's fields
    exp, train = {f.name: f for f in fields(ExperimentConfig)}, {f.name: f for f in fields(TrainConfig)}
    assert exp["group"].metadata == train["group_size"].metadata and exp["group"].default == 6
    assert exp["lr"].metadata["help"] == train["lr"].metadata["help"] and exp["lr"].default != train["lr"].default
    narrowed = setting_like(PolicyConfig, "coords", "absolute", choices=("absolute",))
    assert narrowed.metadata["choices"] == ("absolute",) and narrowed.metadata["help"].startswith("how the model")


def test_add_command_takes_its_description_from_the_command_and_adds_quiet():
    import argparse

    def cmd_run(args):
        """Runs the thing from start to end."""

    sub = argparse.ArgumentParser(prog="x").add_subparsers()
    parser, groups = add_command(sub, "run", RunConfig, cmd_run, "run it")
    assert parser.description == "Runs the thing from start to end." and "agent" in groups
    args = parser.parse_args(["-q", "--limit", "3"])
    assert args.func is cmd_run and args.quiet and from_args(RunConfig, args).limit == 3
    quiet = add_command(sub, "other", JudgeConfig, cmd_run, "other", quiet=False)[0]
    assert not hasattr(quiet.parse_args([]), "quiet")


def test_flags_fill_the_nested_config_and_leave_the_rest_at_the_dataclass_defaults():
    argv = ["eval", "--dataset", "demo", "--backend", "openai", "--model", "m", "--timeout", "5", "--budget", "500000"]
    argv += ["--doc", "a.pdf", "--doc", "b.pdf", "--judge-url", "http://j/v1", "--no-demo-jpeg", "--page-base", "0"]
    cfg = from_args(RunConfig, build_parser().parse_args(argv))
    assert cfg.policy == PolicyConfig(backend="openai", model="m", timeout_s=5.0)
    assert cfg.agent == AgentConfig(s_total=500_000, docs=["a.pdf", "b.pdf"], demo_jpeg=False)
    assert cfg.judge == JudgeConfig(base_url="http://j/v1") and cfg.page_base == 0
    assert cfg.limit == RunConfig.limit and cfg.policy.base_url == PolicyConfig.base_url
    # today's flag names keep working: index's --batch-size and --no-page-images, demo's --no-bundled
    args = build_parser().parse_args(["index", "docs", "--batch-size", "8", "--no-page-images", "--ocr", "none"])
    assert from_args(IngestConfig, args) == IngestConfig(batch_units=8, page_images=False, ocr="none")
    args = build_parser().parse_args(["demo", "--no-bundled", "--no-warmup", "--port", "7861", "--protocol", "vrag"])
    demo = from_args(DemoConfig, args)
    assert (demo.bundled, demo.warmup, demo.port, demo.agent.protocol) == (False, False, 7861, "vrag")
    # train: the YAML, then key=value, then flags
    args = build_parser().parse_args(["train", "--config", "c.yaml", "lr=1e-3", "--lr", "2e-3", "--top-k", "2"])
    assert args.overrides == ["lr=1e-3"] and args_to_dict(TrainConfig, args) == {"lr": 2e-3, "agent": {"top_k": 2}}


def test_the_demo_form_replaces_policy_and_agent_and_refuses_bad_values():
    cfg = DemoConfig(policy=PolicyConfig(temperature=0.3))
    new = apply_form(cfg, "OpenAI-compatible endpoint", "http://h:1/v1", "q", "k", "", "vrag", 5, 500_000, 2)
    assert new.policy == PolicyConfig(
        backend="openai", base_url="http://h:1/v1", model="q", api_key="k", temperature=0.3
    )
    assert (new.agent.protocol, new.agent.max_steps, new.agent.s_total, new.agent.top_k) == ("vrag", 5, 500_000, 2)
    assert cfg.policy.backend == "embedded"  # the session's old settings are untouched
    with pytest.raises(ValueError, match="must start with http"):
        apply_form(cfg, "OpenAI-compatible endpoint", "ftp://x", "", "", "", "vimrag", 5, 500_000, 2)
    with pytest.raises(ValueError, match="model folder"):
        apply_form(cfg, "local transformers model", "", "", "", " ", "vimrag", 5, 500_000, 2)
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        apply_form(cfg, "embedded (offline default)", "", "", "", "", "vimrag", 0, 500_000, 2)


def test_an_eval_run_writes_its_resolved_config(mixed_corpus, mixed_index, tmp_path, capsys):
    import shutil

    index = tmp_path / "idx"
    shutil.copytree(mixed_index, index)  # the run brings its index up to date: not the shared one
    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps({"question": "How many people does the Tampere factory employ?", "answer": ["85"]}))
    out = tmp_path / "run"
    argv = ["eval", "--dataset", f"jsonl:{qs}", "--corpus", str(mixed_corpus), "--index", str(index)]
    argv += ["--model", "keyword", "--top-k", "2", "--budget", "500000", "--api-key", "sk-secret", "--out", str(out)]
    assert main([*argv, "-q"]) == 0, capsys.readouterr().err
    text = (out / "config.json").read_text()
    assert "sk-secret" not in text
    saved = json.loads(text)
    cfg = RunConfig.from_dict({f.name: saved[f.name] for f in fields(RunConfig) if f.name not in ("index",)})
    assert cfg.agent == AgentConfig(top_k=2, s_total=500_000) and cfg.agent.max_steps == 20  # resolved
    assert cfg.policy == PolicyConfig(model="keyword", api_key="***")
    assert to_dict(cfg)["dataset"] == f"jsonl:{qs}" and saved["n_items"] == 1


def test_each_demo_question_keeps_the_config_it_was_answered_with(mixed_corpus, mixed_index, tmp_path):
    import shutil

    from app.web import DemoApp, default_settings
    from app.workspace import Workspace

    shutil.copytree(mixed_index, tmp_path / "index")
    ws = Workspace(tmp_path, corpus=mixed_corpus)
    settings = default_settings("embedded", model="keyword", api_key="sk-secret")
    try:
        list(DemoApp(ws, settings, questions=[]).ask("What was revenue in 2025?", [], settings, "everything"))
    finally:
        ws.close()
    (run,) = [p for p in ws.runs.iterdir() if p.is_dir()]
    saved = json.loads((run / "config.json").read_text())
    assert saved["scope"] == "everything" and saved["policy"]["api_key"] == "***"
    assert DemoConfig.from_dict({k: v for k, v in saved.items() if k != "scope"}) == DemoConfig(
        workdir=settings.workdir, policy=PolicyConfig(model="keyword", api_key="***")
    )
