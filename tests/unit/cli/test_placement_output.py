"""`up` shows the zones it tried as a table on stderr (progress, not a result), the provider's
words as they are (never read as markup), and nothing when there was no choice to make."""

from __future__ import annotations

from trainctl.cli.placement_output import show_placement

TRIED = ({"zone": "us-central1-a", "outcome": "no capacity", "seconds": 6.75, "capacity_in": ["us-central1-c"],
          "reason": "node-0: The zone 'projects/p/zones/us-central1-a' does not have enough resources [503]"},
         {"zone": "us-central1-c", "outcome": "up", "seconds": 6.28, "capacity_in": [], "reason": ""})


def test_the_zones_tried_are_a_table_on_stderr(capsys):
    show_placement(TRIED)
    shown = capsys.readouterr()
    assert shown.out == ""
    for whole in ("zones tried", "us-central1-a", "no capacity", "6.8", "us-central1-c", "up",
                  "does not have enough resources [503]"):
        assert whole in shown.err, shown.err


def test_one_zone_placed_at_once_shows_nothing(capsys):
    show_placement(TRIED[1:])
    assert capsys.readouterr().err == ""
