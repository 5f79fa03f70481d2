"""The plugin API's typed getters (``AbstractConfig``) and their agreement with ``ConfigDef.validate``."""
import pytest

from webapp.plugin import AbstractConfig, ConfigDef, ConfigException, ConfigKey, ConnectException, Password

DEF = ConfigDef((
    ConfigKey("tasks.max", "INT", "1"),
    ConfigKey("split.min.bytes", "LONG", "1048576"),
    ConfigKey("ratio", "DOUBLE", "0.5"),
    ConfigKey("csv.header", "BOOLEAN", "true"),
    ConfigKey("topics", "LIST", None, required=True),
    ConfigKey("connection.password", "PASSWORD", None),
    ConfigKey("value.converter", "CLASS", "org.apache.kafka.connect.json.JsonConverter"),
    ConfigKey("path", "STRING", None),
))


def test_values_are_parsed_and_defaults_apply():
    conf = AbstractConfig(DEF, {"tasks.max": "4", "csv.header": "FALSE", "topics": " a, b ,,c ",
                                "connection.password": "s3cret", "path": ""})
    assert conf.get_int("tasks.max") == 4
    assert conf.get_long("split.min.bytes") == 1 << 20  # the declared default
    assert conf.get_double("ratio") == 0.5
    assert conf.get_bool("csv.header") is False
    assert conf.get_list("topics") == ["a", "b", "c"]
    assert conf.get_class("value.converter") == "org.apache.kafka.connect.json.JsonConverter"
    assert conf.get_string("path") == ""  # given empty stays empty
    password = conf.get_password("connection.password")
    assert isinstance(password, Password) and password.value == "s3cret"
    assert str(password) == repr(password) == "[hidden]"


def test_unset_without_default_is_none_and_an_empty_list():
    conf = AbstractConfig(DEF, {})
    assert conf.get_string("path") is None
    assert conf.get_password("connection.password") is None
    assert conf.get_list("topics") == []


@pytest.mark.parametrize("key, raw, message", [
    ("tasks.max", "four", "Invalid value four for configuration tasks.max: Not a number of type INT"),
    ("split.min.bytes", "1MB", "Invalid value 1MB for configuration split.min.bytes: Not a number of type LONG"),
    ("ratio", "half", "Invalid value half for configuration ratio: Not a number of type DOUBLE"),
    ("csv.header", "yes", "Invalid value yes for configuration csv.header: Expected value to be either true or false"),
])
def test_a_value_that_does_not_parse_names_its_key_as_validate_does(key, raw, message):
    conf = AbstractConfig(DEF, {key: raw})
    getter = {"tasks.max": conf.get_int, "split.min.bytes": conf.get_long, "ratio": conf.get_double,
              "csv.header": conf.get_bool}[key]
    with pytest.raises(ConfigException) as err:
        getter(key)
    assert str(err.value) == message
    assert key in err.value.errors
    assert isinstance(err.value, ConnectException)  # a task failing on it reports it like any config error
    assert DEF.validate({key: raw, "topics": "t"})[key] == [message]


def test_an_undeclared_key_is_refused():
    with pytest.raises(ConfigException, match="Unknown configuration 'nope'"):
        AbstractConfig(DEF, {"nope": "1"}).get_int("nope")


def test_originals_are_a_copy():
    raw = {"tasks.max": "2"}
    conf = AbstractConfig(DEF, raw)
    conf.originals()["tasks.max"] = "3"
    raw["tasks.max"] = "5"
    assert conf.get_int("tasks.max") == 2


def test_boolean_values_are_trimmed_as_kafka_parses_them():
    from webapp.plugin import AbstractConfig, ConfigDef, ConfigKey

    cd = ConfigDef((ConfigKey("flag", "BOOLEAN", "false"),))
    assert AbstractConfig(cd, {"flag": " True "}).get_bool("flag") is True
    assert cd.validate({"flag": " false"}) == {"flag": []}


def test_a_left_out_key_is_judged_by_its_default_and_each_answer_is_its_own():
    """``validate`` judges a default once per ConfigDef; what it returns is the caller's to change."""
    odd = ConfigDef((
        ConfigKey("n", "INT", "x"),
        ConfigKey("mode", "STRING", "fast", allowed=("slow", "safe")),
        ConfigKey("need", "STRING", None, required=True),
        ConfigKey("ok", "BOOLEAN", "true"),
    ))
    first = odd.validate({})
    assert first == {"n": ["Invalid value x for configuration n: Not a number of type INT"],
                     "mode": ["Invalid value fast for configuration mode: String must be one of: slow, safe"],
                     "need": ['Missing required configuration "need" which has no default value.'],
                     "ok": []}
    first["n"].append("changed by the caller")
    first["ok"].append("changed by the caller")
    again = odd.validate({"need": "x"})
    assert again["n"] == ["Invalid value x for configuration n: Not a number of type INT"]
    assert again["ok"] == [] and again["need"] == []
    # a value given is judged itself, an empty one as missing
    assert odd.validate({"n": "3", "mode": "safe", "need": "", "ok": "maybe"}) == {
        "n": [], "mode": [], "need": ['Missing required configuration "need" which has no default value.'],
        "ok": ["Invalid value maybe for configuration ok: Expected value to be either true or false"]}
