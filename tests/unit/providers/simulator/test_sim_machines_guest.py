"""The simulated machines' guest agent reads metadata as GCE's does (which keys make users,
what blocks project keys, what OS Login changes); the e2e tests watch it act on a machine."""

from __future__ import annotations

from datetime import datetime, timezone

from gcpsim.guest import (GOOGLE_COMMENT, authorized_keys_text, oslogin_enabled, parse_bool,
                                       wanted_keys)

NOW = datetime(2026, 11, 25, tzinfo=timezone.utc)


def md(instance: dict[str, str] | None = None, project: dict[str, str] | None = None) -> dict:
    return {"instance": {"attributes": instance or {}}, "project": {"attributes": project or {}}}


def test_instance_and_project_keys_make_users_unless_the_instance_blocks_project_keys():
    both = md({"ssh-keys": "alice:ssh-ed25519 AAAA alice"}, {"ssh-keys": "bob:ssh-ed25519 BBBB bob\nalice:ssh-rsa CCCC"})
    assert wanted_keys(both, NOW) == {"alice": ["ssh-ed25519 AAAA alice", "ssh-rsa CCCC"], "bob": ["ssh-ed25519 BBBB bob"]}
    both["instance"]["attributes"]["block-project-ssh-keys"] = "TRUE"
    assert wanted_keys(both, NOW) == {"alice": ["ssh-ed25519 AAAA alice"]}


def test_the_legacy_sshKeys_item_blocks_project_keys():
    legacy = md({"sshKeys": "carol:ssh-ed25519 DDDD"}, {"ssh-keys": "bob:ssh-ed25519 BBBB"})
    assert wanted_keys(legacy, NOW) == {"carol": ["ssh-ed25519 DDDD"]}


def test_expired_google_ssh_keys_are_dropped_and_unparseable_expiries_count_as_expired():
    lines = ['dave:ssh-ed25519 EEEE google-ssh {"userName":"d","expireOn":"2026-12-01T00:00:00+0000"}',
             'erin:ssh-ed25519 FFFF google-ssh {"userName":"e","expireOn":"2026-11-01T00:00:00+0000"}',
             'frank:ssh-ed25519 GGGG google-ssh {"userName":"f","expireOn":"next week"}',
             "gina:ssh-ed25519 HHHH google-ssh", ":ssh-ed25519 IIII", "no-colon-here"]
    assert list(wanted_keys(md({"ssh-keys": "\n".join(lines)}), NOW)) == ["dave"]


def test_authorized_keys_keep_the_users_own_keys_and_replace_the_metadata_ones():
    existing = f"ssh-ed25519 OWN mine\n{GOOGLE_COMMENT}\nssh-ed25519 OLD gone\n"
    assert authorized_keys_text(existing, ["ssh-ed25519 NEW"]) == \
        f"ssh-ed25519 OWN mine\n{GOOGLE_COMMENT}\nssh-ed25519 NEW\n"


def test_the_instance_decides_os_login_over_the_project():
    assert oslogin_enabled(md(project={"enable-oslogin": "TRUE"}))
    assert not oslogin_enabled(md({"enable-oslogin": "false"}, {"enable-oslogin": "TRUE"}))
    assert not oslogin_enabled(md({"enable-oslogin": "maybe"}))


def test_flags_parse_as_gos_strconv_parsebool():
    assert [parse_bool(v) for v in ("TRUE", "True", "t", "1", "FALSE", "0", "yes", "")] == \
        [True, True, True, True, False, False, None, None]
