"""errors.py: the error classes carry where the offending value came from (Origin), and print it."""

from __future__ import annotations

import pytest

from vjp_explorer import explore
from vjp_explorer.errors import Origin, ShapeError, ValueSyntaxError, VjpError
from vjp_explorer.request import Origins, Request


def test_an_origin_says_how_to_give_the_value_where_it_came_from():
    assert Origin("--grad", "--grad").give_text("ones") == "--grad ones"
    in_file = Origin("f.toml: key 'grad'", "--grad", "f.toml", "grad")
    assert in_file.give_text("ones") == 'grad = "ones" in f.toml (or --grad ones on the command line)'
    assert Origin("grad").give("ones") == "grad=ones"  # the Python API's parameter


def test_a_message_opens_with_the_origin_and_the_marker_is_labelled_with_it():
    e = ShapeError("v has shape [3].", "1,2,3", 0, 5, origin=Origin("f.toml: key 'grad'"))
    first, label, line, marker = e.render().splitlines()
    assert first == "f.toml: key 'grad': v has shape [3]."
    assert label == "  f.toml: key 'grad', column 1:"
    assert (line, marker) == ("    1,2,3", "    ^^^^^")


def test_an_error_without_origin_is_printed_as_worded():
    assert VjpError("The program has no inputs.").render() == "The program has no inputs."


@pytest.mark.parametrize(
    ("request_", "opens"),
    [
        (Request("x*2", {"x": "1,2"}, grad="1,2,3"), "gradient: v has shape [3] but the output 'y' has shape [2]"),
        (Request("x*2", {"x": "1,,2"}), "values['x']: an item is missing"),
        (Request("x*2", {"x": "1"}, consts={"c": [1e39]}), "consts['c']: a value was given for 'c'"),
        (Request("x*2", {"x": "1"}, dtype="float16"), "dtype: must be float32 or float64, not 'float16'"),
        (Request("x*2", {"x": "1"}, output="w"), "output: the output 'w' is not a variable of the program"),
    ],
)
def test_the_python_api_names_its_parameters(request_, opens):
    with pytest.raises(VjpError) as caught:
        explore(request_)
    assert caught.value.render().startswith(opens), caught.value.render()


def test_a_front_end_names_values_in_its_own_words():
    origins = Origins({"grad": Origin("the cell's v", "--grad")})
    with pytest.raises(ShapeError) as caught:
        explore(Request("x*2", {"x": "1,2"}, grad="1,2,3", origins=origins))
    assert caught.value.origin is origins.of("grad")
    assert caught.value.render().startswith("the cell's v: v has shape [3]")
    assert "or write --grad ones" in caught.value.render()  # the hint asks the origin how to give it


def test_a_value_error_deep_in_the_value_parser_carries_the_origin_it_was_given():
    from vjp_explorer.language.values import parse_value

    origin = Origin("--x", "--x")
    with pytest.raises(ValueSyntaxError) as caught:
        parse_value("1,,2", origin)
    assert caught.value.origin is origin and caught.value.label == "--x"


def test_a_missing_value_says_how_the_api_takes_it():
    with pytest.raises(VjpError) as caught:
        explore("x*z", {"x": "1"})
    assert "give it in values (z=...), or in consts for a constant" in caught.value.render()
