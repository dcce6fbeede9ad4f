"""Issue 16 item 2: a checkpoint audit never opens a file outside the checkpoint through a symlink.

A `model.safetensors`, a DCP `.metadata`, a manifest, a safetensors index and a discovered `*.pt`
that are symlinks out of their folder are each a `path_escape` problem, and no byte of the outside
file is read (an audit hook watches every open) or shown in a problem's detail. A symlink that stays
inside the folder is followed as before (the look-alike that must not be flagged).
"""

from pathlib import Path

import pytest

from sources import checkpoint_audit as ca
from tests.fault_injection.opens import watch_opens
from tests.helpers import distcp_checkpoint, goodput_checkpoint, hf_checkpoint, kinds, torch_file

pytestmark = pytest.mark.fault_injection

SECRET = b"\x08\x00\x00\x00\x00\x00\x00\x00{\"x\":1}SECRET-BYTES"


@pytest.fixture
def outside(tmp_path) -> Path:
    target = tmp_path / "outside" / "secret.bin"
    target.parent.mkdir()
    target.write_bytes(SECRET)
    return target.resolve()


def _audit_without_reading(path: Path, outside: Path) -> ca.Audit:
    with watch_opens() as opened:
        audit = ca.audit_checkpoint(path, ca.HashCache())
    assert outside not in opened, f"the audit opened {outside}"
    assert not any("SECRET" in p.detail or "\\x08" in p.detail for p in audit.problems)
    return audit


def test_a_safetensors_shard_linked_out_is_an_escape_never_opened(tmp_path, outside):
    ck = tmp_path / "ckpts" / "single"
    ck.mkdir(parents=True)
    (ck / "model.safetensors").symlink_to(outside)
    audit = _audit_without_reading(ck, outside)
    assert [(p.kind, p.file) for p in audit.problems] == [("path_escape", "model.safetensors")]


def test_an_hf_index_and_shard_linked_out_are_escapes(tmp_path, outside):
    ck = hf_checkpoint(tmp_path / "hf")
    (ck / "model-00002-of-00003.safetensors").unlink()
    (ck / "model-00002-of-00003.safetensors").symlink_to(outside)
    audit = _audit_without_reading(ck, outside)
    assert ("path_escape", "model-00002-of-00003.safetensors") in {(p.kind, p.file) for p in audit.problems}
    (ck / ca.SAFETENSORS_INDEX).unlink()
    (ck / ca.SAFETENSORS_INDEX).symlink_to(outside)
    assert "path_escape" in kinds(_audit_without_reading(ck, outside))


def test_a_dcp_metadata_linked_out_is_an_escape(tmp_path, outside):
    ck = distcp_checkpoint(tmp_path / "dcp")
    (ck / ".metadata").unlink()
    (ck / ".metadata").symlink_to(outside)
    audit = _audit_without_reading(ck, outside)
    assert ("path_escape", ".metadata") in {(p.kind, p.file) for p in audit.problems}


def test_a_manifest_linked_out_is_an_escape(tmp_path, outside):
    ck = goodput_checkpoint(tmp_path / "gp")
    (ck / ca.MANIFEST_NAME).unlink()
    (ck / ca.MANIFEST_NAME).symlink_to(outside)
    assert "path_escape" in kinds(_audit_without_reading(ck, outside))


def test_a_discovered_pt_linked_out_is_an_escape(tmp_path, outside):
    root = tmp_path / "ckpts"
    torch_file(root / "run-a" / "real.pt")
    (root / "run-a" / "latest.pt").symlink_to(outside)
    found = ca.discover([root])
    assert root / "run-a" / "latest.pt" in found
    audit = _audit_without_reading(root / "run-a" / "latest.pt", outside)
    assert [(p.kind, p.file) for p in audit.problems] == [("path_escape", "latest.pt")]


def test_a_symlink_that_stays_inside_is_followed(tmp_path):
    """The look-alike: links inside the checkpoint folder are audited like the files they name."""
    ck = hf_checkpoint(tmp_path / "hf")
    shard = ck / "model-00001-of-00003.safetensors"
    (ck / "store").mkdir()
    shard.rename(ck / "store" / shard.name)
    shard.symlink_to(Path("store") / shard.name)
    audit = ca.audit_checkpoint(ck, ca.HashCache())
    assert "path_escape" not in kinds(audit)
    single = torch_file(tmp_path / "runs" / "model.pt")
    (tmp_path / "runs" / "latest.pt").symlink_to("model.pt")
    assert ca.audit_checkpoint(tmp_path / "runs" / "latest.pt").ok
    dangling = tmp_path / "runs2"
    dangling.mkdir()
    (dangling / "model.safetensors").symlink_to(tmp_path / "nowhere")
    assert kinds(ca.audit_checkpoint(dangling)) == {"path_escape"}
    assert single.exists()
