"""Which legacy encoding a file that is not UTF-8 reads as: the advice of its refusal, never a silent guess.

A file is indexed in a legacy encoding only when it declares one (``textdecode``); otherwise it is refused, and
the refusal names the encodings of a short list (``CANDIDATES``) its bytes decode as plausibly: decoded strictly,
then scored by what text in that script looks like (no control or unassigned characters, words of one script,
mostly lowercase Cyrillic, Latin words mostly of ASCII letters, kana in Japanese and none in Chinese, common
ideographs). The general detectors (charset-normalizer, chardet) were tried: on files of one or two sentences,
the usual size of a note, they named cp1250 for German cp1252 and Shift_JIS for KOI8-R Russian, and neither is a
dependency of ours.
"""

from __future__ import annotations

import itertools
import unicodedata

__all__ = ["CANDIDATES", "readable_encodings"]

#: (codec, what to call it), in the order that breaks ties: the most common first
CANDIDATES = (
    ("cp1251", "Windows-1251, Cyrillic"),
    ("cp1252", "Windows-1252, Western European"),
    ("shift_jis", "Shift_JIS, Japanese"),
    ("gb18030", "GB18030/GBK, Simplified Chinese"),
    ("euc-kr", "EUC-KR, Korean"),
    ("big5", "Big5, Traditional Chinese"),
    ("euc-jp", "EUC-JP, Japanese"),
    ("koi8-r", "KOI8-R, Cyrillic"),
)
_CHINESE = frozenset({"gb18030", "big5"})
_JAPANESE = frozenset({"shift_jis", "euc-jp"})
#: non-letters that text holds: typographic punctuation and symbols of Latin-1, General Punctuation, CJK ones
#: where a code keeps its common ideographs (GB2312 level 1 and 2, Big5's frequent ones, JIS level 1), as the
#: first byte of their EUC form: text in that code is nearly all of them, other text read in it is not
_COMMON_HAN = {"gb18030": ("gb2312", 0xB0, 0xF7), "big5": ("big5", 0xA4, 0xC6), "shift_jis": ("euc-jp", 0xB0, 0xCF)}
_COMMON_HAN["euc-jp"] = _COMMON_HAN["shift_jis"]
_USUAL_SYMBOLS = frozenset("\u00a0\u00ab\u00bb\u00b0\u00a7\u00a9\u00ae\u00b1\u00b7\u00bf\u00a1\u20ac\u2122\u2116\u00d7")
_PLAUSIBLE = 3
_SCAN_BYTES = 65536  # enough text to judge; a legacy file's advice need not read all of a large one


def readable_encodings(data: bytes, *, limit: int = 2) -> list[tuple[str, str]]:
    """The candidates ``data`` decodes as plausibly, best first (at most ``limit``), as (codec, name) pairs.

    Empty when none decodes without errors or control characters into something that reads as text (at most one
    implausible word or symbol in ``_PLAUSIBLE`` words).
    """
    sample = data[:_SCAN_BYTES]
    scored: list[tuple[float, int, str, str]] = []
    for rank, (codec, name) in enumerate(CANDIDATES):
        text = _decode_prefix(sample, codec, whole=len(sample) == len(data))
        if text is None:
            continue
        penalty = _implausibility(text, codec)
        if penalty is not None:
            scored.append((penalty, rank, codec, name))
    scored.sort()
    if not scored or scored[0][0] > 1 / _PLAUSIBLE:
        return []
    best = scored[0][0]
    # the best, and those nearly as good (a short file can read as both Windows-1251 and KOI8-R)
    return [(codec, name) for penalty, _, codec, name in scored if penalty <= best + 0.05][:limit]


def _decode_prefix(sample: bytes, codec: str, *, whole: bool) -> str | None:
    """``sample`` decoded strictly; a cut multi-byte character at its end is forgiven when it is a prefix."""
    try:
        return sample.decode(codec)
    except UnicodeDecodeError as err:
        if whole or err.start < len(sample) - 4:
            return None
        try:
            return sample[: err.start].decode(codec)
        except UnicodeDecodeError:
            return None


def _group(char: str) -> str:
    """A letter's script, with Han and kana one group (Japanese mixes them)."""
    name = unicodedata.name(char, "")
    if name.startswith(("CJK ", "HIRAGANA", "KATAKANA")):
        return "KANA" if name.startswith(("HIRAGANA", "KATAKANA")) else "HAN"
    return name.split(" ", 1)[0]


def _implausibility(text: str, codec: str) -> float | None:
    """Penalties per word holding non-ASCII characters (lower reads better), or None for text that is no text."""
    penalty = 0.0
    words = 0
    kana = han = spaced = 0
    word: list[str] = []
    gap = ""  # the ASCII between the last word and this one
    last_ideographic = False
    for char in [*text, " "]:
        if char.isascii() and not char.isalpha():
            if word:
                words += 1
                penalty += _word_penalty(word)
                word_kana = sum(1 for c in word if _group(c) == "KANA")
                word_han = sum(1 for c in word if _group(c) == "HAN")
                ideographic = word_kana + word_han > 0
                spaced += ideographic and last_ideographic and gap == " "
                kana, han, last_ideographic, gap = kana + word_kana, han + word_han, ideographic, ""
                word = []
            gap += char
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cn", "Co", "Cs"):
            return None
        if category[0] in "LM" or char.isascii():
            word.append(char)
        elif char not in _USUAL_SYMBOLS and not _usual_punctuation(char):
            penalty += 1  # a box-drawing piece, a currency sign, a half-width form: what random bytes turn into
    if codec in _CHINESE or codec in _JAPANESE:
        penalty += spaced  # Chinese and Japanese put no space between words; Korean read as either does
    penalty += _rare_ideographs(text, codec)
    if codec in _CHINESE and kana:
        penalty += words  # Chinese text holds no kana: this is Japanese read in a Chinese code
    if codec in _JAPANESE and han and not kana:
        penalty += 0.5 * words  # Japanese text without any kana is rare; Chinese or Korean read as Japanese
    return penalty / max(words, 1)


def _rare_ideographs(text: str, codec: str) -> int:
    """How many ideographs of ``text`` are outside the common ones of ``codec``."""
    if codec not in _COMMON_HAN:
        return 0
    common, low, high = _COMMON_HAN[codec]
    rare = 0
    for char in text:
        if _group(char) == "HAN" and not char.isascii() and unicodedata.category(char) == "Lo":
            try:
                rare += not low <= char.encode(common)[0] <= high
            except UnicodeEncodeError:
                rare += 1
    return rare


def _usual_punctuation(char: str) -> bool:
    code = ord(char)
    return 0x2010 <= code <= 0x2027 or 0x3000 <= code <= 0x303F or 0xFF01 <= code <= 0xFF5E


def _word_penalty(word: list[str]) -> float:
    """1 for a word no language writes: mixed scripts, mostly accented Latin letters, Cyrillic in odd case."""
    letters = [c for c in word if c.isalpha()]
    groups = {_group(c) for c in letters if not c.isascii()}
    if any(c.isascii() for c in letters) and groups - {"LATIN"}:
        groups.add("LATIN")
    if len(groups) > 1 and groups != {"HAN", "KANA"}:
        return 1.0
    if any(0xFF61 <= ord(c) <= 0xFF9F for c in word):  # half-width katakana: gone from text since the 1990s
        return 1.0
    if groups == {"LATIN"}:
        accented = sum(1 for c in letters if not c.isascii())
        return 1.0 if accented >= 3 and accented * 5 > len(letters) * 3 else 0.0
    if groups == {"CYRILLIC"} and len(letters) >= 3:
        upper = sum(1 for c in letters if c.isupper())
        inner = any(a.islower() and b.isupper() for a, b in itertools.pairwise(letters))
        return 1.0 if inner or upper * 2 > len(letters) else 0.0
    return 0.0
