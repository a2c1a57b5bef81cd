"""A count and its noun in the number it takes, for summary lines: '1 speaker', '5 speakers', '0 utterances'.
Standard library only: the data tools use it without torch."""


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """'<n> <noun>' for 1, '<n> <plural>' (noun + 's' unless given) for any other number."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
