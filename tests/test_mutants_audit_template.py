"""The template form's slot count (guarddiag.audit.template), written against a surviving
mutant: a text needs two words besides *all* its slots, however many slots it has."""

from __future__ import annotations

from guarddiag.audit.template import template_form


def test_every_slot_is_counted_against_the_fixed_words():
    # '"Hello" by Adele' → qslot by nslot: two slots, one other word ("by") < 2: no template.
    assert template_form('"Hello" by Adele') is None
    # One more word ("sing"): two other words, so the form stands.
    assert template_form('Sing "Hello" by Adele') == "sing qslot by nslot"
    # One slot and two other words is enough too.
    assert template_form('Sing "Hello" now') == "sing qslot now"
