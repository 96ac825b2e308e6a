"""Wording helpers for messages: the indefinite article of a name ("an ApexAgent", "a DQNAgent")."""

#: Names read letter by letter whose first letter sounds like a vowel ("an RMSPropOptimizer", "an SGDOptimizer").
_VOWEL_SOUNDING_LETTERS = set("AEFHILMNORSX")


def with_article(name):
    """``name`` with its indefinite article: "an ApexAgent", "a DQNAgent", "an IMPALAAgent", "an RMSProp".

    A name that starts with two capitals (or a capital and a digit) is read letter by letter (DQN: "dee", R2D2:
    "ar"); others by their first letter's vowel.
    """
    name = str(name)
    if not name:
        return name
    spelled = len(name) > 1 and name[0].isupper() and (name[1].isupper() or name[1].isdigit())
    if spelled and not name.startswith("IMPALA"):  # (IMPALA is read as a word.)
        vowel = name[0] in _VOWEL_SOUNDING_LETTERS
    else:
        vowel = name[0].lower() in "aeiou"
    return f"{'an' if vowel else 'a'} {name}"
