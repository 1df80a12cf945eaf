"""Settings from a `key = value` text."""


class ConfigError(Exception):
    pass


REQUIRED = {"host": str, "port": int, "workers": int}


def parse(text):
    settings = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "=" not in line:
            raise ConfigError(f"line {number}: expected `key = value`")
        key, value = (part.strip() for part in line.split("=", 1))
        settings[key] = value
    return settings


def load_config(text):
    settings = parse(text)
    config = {}
    try:
        for key, kind in REQUIRED.items():
            config[key] = kind(settings[key])
    except Exception:
        return None
    return config
