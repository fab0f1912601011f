"""images: placeholder until bench/datasets_scale.py lands."""
NAME = "datasets"
TITLE = "Datasets: 10k to 1M samples"


def prepare(ctx):
    raise NotImplementedError("datasets scenario: not yet")


def runs(ctx):
    return []


def report(records):
    return ""


def summary(records):
    return ""


def plot(records, path):
    pass
