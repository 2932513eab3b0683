"""Text from outside (a model name, a file's line, a log line from an image) made safe for where it is
shown: a terminal (`strip_controls`), a markdown table or heading (`md_text`), an HTML page
(`html_text`). Every pattern here is linear: no nesting, no backtracking over the same characters.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Unicode's bidirectional formatting characters (UAX #9: ALM, LRM, RLM, the embeddings and overrides
LRE..RLO, the isolates LRI..PDI): a name holding U+202E shows what follows it on its line reversed, in a
terminal, a markdown or HTML table and a spreadsheet alike (CVE-2021-42574, "Trojan Source"): a model
name `q<U+202E>8q` made the numbers after it in its csv row read backwards. Stripped with the controls."""

# Terminal control sequences (ECMA-48): OSC (ESC ] ... BEL or ST: window title, OSC 52 clipboard,
# hyperlinks), CSI (ESC [ params final: colours, cursor moves, erase), other ESC sequences, and every
# C0 control but tab and newline, DEL and the C1 controls (8-bit CSI \x9b, OSC \x9d); and the Unicode
# bidi controls (BIDI_CONTROLS), which reorder what follows them on the line as it is displayed.
CONTROL = re.compile(
    r"(?:\x1b\]|\x9d)[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC, 7- and 8-bit, to BEL or ST
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"  # CSI, 7- and 8-bit
    r"|\x1b[ -~]?"  # any other ESC sequence
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # C0 but tab and newline, DEL, C1
    f"|[{BIDI_CONTROLS}]"  # Unicode bidi controls
)

# the first character of every CONTROL match
_CONTROL_START = re.compile(rf"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CONTROLS}]")

# The ASCII characters no CONTROL match starts with (tab, newline, space to ~): an ASCII text with
# nothing left once they are deleted (bytes.translate, ~4x faster than _CONTROL_START.search) has none.
_ASCII_PLAIN = bytes([9, 10, *range(32, 127)])

# `&` that starts an entity (`&lt;`, `&#124;`): shown as `<`, `|`, not as written, in a cell, a heading
# or a line of prose alike: escaped by both patterns below.
_ENTITY = r"&(?=#?[0-9A-Za-z]+;)"

# What GitHub turns into a link though no markup asks for one (GFM's extended autolinks): a scheme's
# `://` (`https://x`, `ftp://x`) and `www.`, their `:` and `.` escaped with a backslash; and an email's
# `@` after an address's character or a scheme's `:` and before a domain holding a dot, even at its
# start (`a@b.c`, `b@.com`, `mailto:@x.y`, `xmpp:@x.y`: each a link in cmark-gfm; never the
# toolkit's `label@import:0123`), found after escapes are undone (cmark-gfm's postprocess: `\@` and
# `&#64;` are still links), so followed by a word joiner (U+2060, written `&#8288;`: shown as nothing)
# that ends the address; each lookahead stops at the next `@`: linear. A model named
# `see https://evil.example`, `www.evil.example` or `me@evil.example` is text, not a link, on the page
# a customer reads (checked with cmark-gfm, GitHub's renderer). Every alternative of the patterns
# below opens with the character it escapes (a lookbehind after it, not before): the engine then skips
# to those characters, ~10x faster on a report's text (its 25,000 cells: 0.35 s -> ~0.04 s).
_AUTOLINK = r":(?=//)|\.(?<=[Ww]{3}\.)|@(?<=[0-9A-Za-z.+_:-]@)(?=[0-9A-Za-z_-]*\.[0-9A-Za-z_-])"
_ESCAPED = {"](": "]\\(", "@": "@&#8288;"}

# What, in one table cell or heading, markdown reads as structure or styling: a backslash, `|`, `<`,
# `>`, `](`, emphasis and strikethrough (`*`, `~`), a code span's backtick, and `_` where it can open
# or close emphasis (CommonMark 6.2: not between two letters or digits, so `n_cpu_moe` stays as it is).
_MD_SPECIAL = re.compile(r"\\|\||<|>|\*|~|`|\]\(|_(?<![^\W_]_)|_(?![^\W_])|" + _AUTOLINK + "|" + _ENTITY)

# What, in a line of prose the toolkit writes (a verdict line: `->` and `< 168.0%` are its own), starts
# markdown structure: a backslash (it would undo the next escape), `<` before a letter, `/`, `!` or `?`
# (an HTML tag or an autolink, CommonMark 6.5-6.6), `](` (a link or image) and `|`; and what would
# style a name (`*`, `~`, `_` where it can open or close emphasis, as _MD_SPECIAL): a `--label x**y`
# made the rest of its verdict line bold; a backtick (a name's one backtick paired with the next one
# of the toolkit's own `toolkit bench -m NAME` and turned the words between into code, the command
# into prose); and what GitHub autolinks (_AUTOLINK). The toolkit's own bold is added after escaping
# (format_verdict).
_MD_LINE_SPECIAL = re.compile(
    r"\\|<(?=[A-Za-z/!?])|\||\]\(|\*|~|`|_(?<![^\W_]_)|_(?![^\W_])|" + _AUTOLINK + "|" + _ENTITY
)

# A surrogate code point on its own (JSON "\ud800" decodes to one): no encoding can write it, so a
# terminal, a pipe or a file would raise UnicodeEncodeError. A pair in JSON decodes to one character.
SURROGATE = re.compile(r"[\ud800-\udfff]")


_PATH_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def path_text(path: object) -> str:
    """A path as a message prints it: a control character or an undecodable byte (a lone surrogate)
    written as its escape (`\\x1b`, `\\n`, `\\udcff`), never stripped, so the path printed is the one on
    disk."""
    text = str(path)
    return _PATH_UNPRINTABLE.sub(
        lambda m: m.group(0).encode("unicode_escape", "backslashreplace").decode("ascii"), text
    )


NOT_ONE_LINE = re.compile(rf"[\x00-\x1f\x7f-\x9f{BIDI_CONTROLS}\ud800-\udfff]")
"""What one line of text from outside that is stored or printed as it is (a run id, a TOOLKIT_* variable's
value) may not hold: a C0 or C1 control, DEL, a bidi control, an undecodable byte (a lone surrogate)."""
_SHELL_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'"}


def shell_word(word: str) -> str:
    """`word` as one word of a command line to paste (a suggested command's path) that a POSIX shell reads
    back as `word`, with nothing a terminal would act on: shlex.quote where it holds no control character;
    else ANSI-C quoting (`$'a\\nb'`: bash, zsh, ksh, POSIX.1-2024 sh), each C0 or C1 control, DEL, bidi
    control and undecodable byte (os.fsdecode's lone surrogate) written as its escape (`\\n`, `\\t`, `\\r`,
    else `\\xHH` per UTF-8 byte)."""
    if NOT_ONE_LINE.search(word) is None:
        return shlex.quote(word)
    return "$'" + "".join(_shell_char(c) for c in word) + "'"


def shell_join(words: Iterable[str]) -> str:
    """`words` as a command line to paste (a dry run's exact `docker run`, `docker buildx build`):
    each word quoted by shell_word, joined by spaces; shlex.join kept a path's ESC raw, which the
    terminal printer then stripped, so the command printed named another path."""
    return " ".join(shell_word(w) for w in words)


def _shell_char(c: str) -> str:
    """One character of shell_word's `$'...'`: as it is, backslash-escaped, or its bytes as `\\xHH`."""
    if c in _SHELL_ESCAPES:
        return _SHELL_ESCAPES[c]
    if NOT_ONE_LINE.match(c) is None:
        return c
    raw = c.encode("utf-8", "surrogateescape" if "\udc80" <= c <= "\udcff" else "surrogatepass")
    return "".join(f"\\x{b:02x}" for b in raw)


def strip_controls(text: str) -> str:
    """`text` without terminal control sequences (OSC 0 sets a window title, OSC 52 writes the
    clipboard), tab and newline kept, and each lone surrogate replaced by U+FFFD: what is left can be
    written to any UTF-8 terminal or file."""
    if text.isascii():  # the common case (a report's 10 MB: ~20 ms where the search took ~85)
        return text if plain_ascii(text) else CONTROL.sub("", text)
    if _CONTROL_START.search(text) is not None:  # a tenth of the time of sub where there is none
        text = CONTROL.sub("", text)
    return SURROGATE.sub("\ufffd", text)


_PIECE = 1 << 20


def plain_ascii(text: str) -> bool:
    """An ASCII `text` holds no character a CONTROL match starts with (strip_controls leaves it as it
    is, and so each of its pieces), checked a MiB at a time: no copy of a 10 MB report beside it."""
    return not any(
        text[i : i + _PIECE].encode("ascii").translate(None, _ASCII_PLAIN)
        for i in range(0, len(text), _PIECE)
    )


class Prose(str):
    """A line of the toolkit's own words (`...` spans its own code spans) holding `names`: the parts put
    into it as it was composed that are not its words (a record's names, a label, a path, a command
    holding one: data), each a text taken whole as data, or a Prose whose own names are taken. It is
    the str it reads as everywhere; md_line and md_text render its spans as code and escape the rest,
    its names wherever they stand (md_prose), so a name's backtick pairs with none of the toolkit's.
    A plain str given to them is escaped whole: a line not composed as Prose has no spans of its own."""

    names: tuple[str, ...]

    def __new__(cls, text: str, *names: object) -> Prose:
        out = super().__new__(cls, text)
        out.names = tuple(x for n in names for x in (n.names if isinstance(n, Prose) else (str(n),)))
        return out


def md_text(text: str) -> str:
    """`text` for a markdown heading or a name in a line (md_cell: a table cell): controls stripped, line
    breaks as spaces, and what markdown reads as structure escaped with a backslash (`|` ends a cell, `<...>` is HTML,
    `](` makes a link, a backslash would undo the escape after it: a name's `\\<img ...>` was a tag),
    so a name cannot add a column, a row, a tag or a link; and what would style it (`**x**`, `_x_`,
    `~~x~~`, a backtick's code span), so a model_type `**30B**` is shown as written, not in bold; and
    what GitHub autolinks (`https://`, `www.`, an email's `@`: _AUTOLINK), so a name links nowhere. A
    Prose's own spans are code (md_prose)."""
    return md_cell(text, cell=False)


def md_cell(text: str, *, cell: bool = True) -> str:
    """md_text for one GFM table cell: a Prose's code spans hold `\\|` for a `|` too (GFM splits a row
    at every unescaped pipe before it reads the spans; outside a table `\\|` would show as written)."""
    return (
        md_prose(text, text.names, _MD_SPECIAL, cell=cell)
        if isinstance(text, Prose)
        else _md_escaped(text, _MD_SPECIAL)
    )


def md_line(text: str) -> str:
    """A line of the toolkit's own markdown prose that quotes names from records (a verdict line):
    controls stripped, line breaks as spaces, and only what would start markup escaped
    (_MD_LINE_SPECIAL: a tag, an autolink, a link or image, a cell break, a backslash, emphasis marks),
    so `->` and `a < b` read as written, a model name `<img src=https://...>` or `![x](https://...)`
    loads nothing when the page is opened, a label `x**y` styles nothing and a name `https://x` links
    nowhere. Every backtick of a str is escaped too; a Prose's own spans are code (md_prose)."""
    return md_prose(text, text.names) if isinstance(text, Prose) else _md_escaped(text, _MD_LINE_SPECIAL)


def md_prose(
    text: str, names: Iterable[str] = (), special: re.Pattern[str] = _MD_LINE_SPECIAL, *, cell: bool = False
) -> str:
    """A line of the toolkit's prose for markdown (a report's note, a verdict line, a README note): its
    own `...` spans as code spans (code()), the rest escaped as md_line escapes it (`special`: md_text's
    for a cell or a heading). `names` (the data put into the line: Prose.names, quoted as such or as
    repr) are held out while the spans are found: a name's backtick opens or closes none. `cell`: the
    line is a table cell (code(cell=True))."""
    quoted = sorted({q for n in names if "`" in n for q in (repr(n), n)}, key=len, reverse=True)
    held = {f"\0{i}\0": q for i, q in enumerate(quoted)}  # the longest first: a name holding another
    for mark, q in held.items():
        text = text.replace(q, mark)
    parts = re.split(r"`([^`]*)`", text)
    for mark, q in held.items():
        parts = [p.replace(mark, q) for p in parts]
    return "".join(code(p, cell=cell) if i % 2 else _md_escaped(p, special) for i, p in enumerate(parts))


def code(v: object, *, cell: bool = False) -> str:
    """`v` as one markdown code span on one line, whatever it holds: controls stripped, line breaks as
    spaces, fenced by one backtick more than its longest run of them (CommonMark 6.1), padded where it
    starts or ends with one. Inside it nothing is markup: a model name `x` <img src=...> `` from an
    imported file closed the README's single-backtick span and put a live tag on the page. `cell`: in a
    GFM table cell, where a `|` ends the cell even inside a span unless written `\\|`."""
    text = " ".join(strip_controls(str(v)).splitlines())
    text = text.replace("|", "\\|") if cell else text
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def counted(n: int, noun: str) -> str:
    """A count and its noun in the count's number: `1 byte`, `0 bytes`, `2 slices` (an `s` added)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def one_line(text: str) -> str:
    """`text` for one line of a terminal's text: controls stripped, line breaks and tabs as spaces (a
    name's newline made a table's header two rows and a refusal two lines)."""
    return strip_controls(text).replace("\r", " ").replace("\n", " ").replace("\t", " ")


def _md_escaped(text: str, special: re.Pattern[str]) -> str:
    """`text` on one line (one_line), each match of `special` escaped with a backslash (`](` as `]\\(`;
    `@` followed by a word joiner: _AUTOLINK)."""
    return special.sub(lambda m: _ESCAPED.get(m.group(0)) or "\\" + m.group(0), one_line(text))


def html_text(text: str) -> str:
    """`text` for an HTML page: controls stripped (a page is also `cat` to terminals), then escaped."""
    import html  # here: every command imports this module, only the html report escapes

    return html.escape(strip_controls(text))


# What no tool's line of output begins with, read past at a line's start (`line_text`): whitespace, NUL
# and the other C0 and C1 controls, DEL, zero-width and bidi characters, byte-order marks, and terminal
# escape sequences (CSI, OSC, other ESC). Nothing follows the repeat, so it never backtracks: linear.
_LINE_LEAD = re.compile(
    r"(?:(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -~]?"
    r"|[\s\x00-\x1a\x1c-\x1f\x7f-\x9a\x9c\x9e\x9f\u200b-\u200f\u2060\ufeff" + BIDI_CONTROLS + r"]+)+"
)
_LINE_TAIL = " \t\r\n\v\f\x00\x7f\u200b\u200c\u200d\u2060\ufeff"


def line_text(line: str) -> str:
    """A line of a file as its text: stripped, and without what no tool writes before its text (NUL bytes: a
    file a crash zero-filled, then appended to; a byte-order mark; zero-width and bidi characters; a
    terminal's escape sequences: a capture through `script` or a coloured prompt) or after it (NUL,
    zero-width, a BOM): `{"a": 1}` after 4,096 NUL bytes is `{"a": 1}`. Linear; a line that starts and ends
    with printable text is only stripped (the cost of every line)."""
    if line[:1].isprintable() and line[-1:].isprintable() and not (line[:1].isspace() or line[-1:].isspace()):
        return line
    m = _LINE_LEAD.match(line)
    return (line[m.end() :] if m else line).rstrip(_LINE_TAIL)


_CODE_PAGES = ("cp1252", "cp437", "cp1251", "cp1253", "cp1257", "gbk", "cp932", "cp949", "big5", "mac_roman")
"""The code pages a console or an editor reads UTF-8 in where it is not told otherwise (Windows' ANSI and
OEM pages, East Asian ones, old Macs): llama-bench's `±` (UTF-8 C2 B1) reads as `Â±` (cp1252), `┬▒`
(cp437), `В±` (cp1251), `卤` (GBK), `ﾂｱ` (cp932) in them."""


def as_written(text: str) -> str:
    """A line of llama-bench's table as it wrote it, where a paste read its UTF-8 in a legacy code page
    (_CODE_PAGES: `373.50 Â± 3.96` is `373.50 ± 3.96`, and every other character of that line with it): the
    first page whose bytes of `text` are UTF-8 holding a `±`, the one non-ASCII character llama-bench writes;
    else `text` as it is (ASCII; a name in Chinese, Cyrillic, Japanese: `专业`, `ДЕ` are UTF-8 in GBK's bytes
    too, but no `±`). Linear in `text`."""
    if text.isascii():
        return text
    for page in _CODE_PAGES:
        try:
            if "±" in (read := text.encode(page).decode("utf-8")):
                return read
        except UnicodeError:
            continue
    return text
