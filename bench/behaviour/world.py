"""The simulated population: hidden user profiles, their session schedules and the changes of
habit halfway. Everything here is pure and seeded: the same ``WorldConfig`` builds the same
world, independent of the Engram configuration that is later run on it.

The world, in numbers (the constants below; the schedules in ``_session_days``):

- **Catalogue.** Five domains (the default emission rules' royalty, contract, account, product,
  revenue), six tools each (``royalty_report`` … ``royalty_forecast``), three task types per
  domain; task type ``k`` can be done by the two tools ``2k`` and ``2k + 1``. A task's
  candidates are the six tools of its domain, scored by a catalogue search on the caller's
  relevance scale: a static keyword quality in [0, 1), plus ``RELEVANCE_GAP`` (2.5) for the two
  tools that can do the task, plus Gaussian noise (σ ``SCORE_NOISE`` = 1.0) for the wording of
  the query. The gap is larger than the largest default boost (2 × affinity ≤ 2), which is
  what makes the boost a tiebreaker: a relevant tool is outranked by an irrelevant one only
  when the query's wording is off. Between the two tools that can do a task the catalogue
  cannot tell which one this user wants; only memory can.
- **Users.** 1-3 domains each (weights 0.6 / 0.3 / 0.1 in a random order), task-type weights
  0.6 / 0.25 / 0.15 per domain, and for each task type a *habit*: the tool of the two that the
  user wants. Every tool of the user's domains has a true success probability for that user:
  reliable (65 %, p in [0.9, 0.99]), flaky (20 %, [0.35, 0.7]) or broken (15 %, [0, 0.05]);
  a habit is always reliable. Entities: one or two types (account via ``get_account``, product
  via ``get_products_by_isrc``, schema table via ``search_snowflake_schema``, the default entity
  rules), 15 entities per type with Zipf(1.2) visit weights, 1-3 lookups per session.
- **Schedules** over ``days`` (60): users start on day 0-6; *daily* users (40 %) come on 85 % of
  weekdays and 15 % of weekend days, sometimes twice; *weekly* users (35 %) on ~1.5 days a week;
  *returning* users (25 %) on 60 % of days but vanish for 10-25 days once. Sessions happen
  between 08:00 and 18:00.
- **Changes.** At ``change_day`` (30) a share of users (45 %) change one habit: *switch* (40 %:
  the main task moves from its habit tool A to the other tool B; A still works), *break* (25 %:
  A stops working for the user, p < 0.05, and the user moves to B), or *move* (35 %: the main
  domain is replaced by one the user never used, with fresh habits).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

from engram.clock import MS_PER_DAY

T = TypeVar("T")
Archetype = Literal["daily", "weekly", "returning"]
ChangeKind = Literal["switch", "break", "move"]

DOMAINS: tuple[str, ...] = ("royalty", "contract", "account", "product", "revenue")
TOOL_VERBS: tuple[str, ...] = ("report", "search", "summary", "export", "audit", "forecast")
TASK_WORDS: tuple[str, ...] = ("numbers", "details", "overview")
TASKS_PER_DOMAIN = 3
RELEVANCE_GAP = 2.5
SCORE_NOISE = 1.0
DOMAINS_PER_USER: tuple[tuple[int, float], ...] = ((1, 0.35), (2, 0.45), (3, 0.2))
DOMAIN_WEIGHTS = (0.6, 0.3, 0.1)
TASK_WEIGHTS = (0.6, 0.25, 0.15)
TASKS_PER_SESSION: tuple[tuple[int, float], ...] = ((1, 0.5), (2, 0.35), (3, 0.15))
LOOKUPS_PER_SESSION: tuple[tuple[int, float], ...] = ((1, 0.4), (2, 0.4), (3, 0.2))
ENTITIES_PER_TYPE = 15
ZIPF_S = 1.2
#: entity type → the default emission rule's tool and how its result names the entity
ENTITY_TOOLS: dict[str, str] = {
    "account": "get_account",
    "product": "get_products_by_isrc",
    "schema_table": "search_snowflake_schema",
}
ENTITY_TYPE_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("account", 0.5),
    ("product", 0.3),
    ("schema_table", 0.2),
)
ARCHETYPES: tuple[tuple[Archetype, float], ...] = (
    ("daily", 0.4),
    ("weekly", 0.35),
    ("returning", 0.25),
)
CHANGE_KINDS: tuple[tuple[ChangeKind, float], ...] = (
    ("switch", 0.4),
    ("break", 0.25),
    ("move", 0.35),
)
#: a tool whose success probability is below this does not "work well" (flaky or broken)
RELIABLE_P = 0.8
#: (share of tools, range of success probability) of reliable, flaky and broken tools
RELIABLE = (0.65, (0.9, 0.99))
FLAKY = (0.2, (0.35, 0.7))
BROKEN = (0.15, (0.0, 0.05))
#: what a user does in at least this share of sessions is part of their core profile
CORE_USAGE = 0.15
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a Thursday


@dataclass(frozen=True)
class WorldConfig:
    seed: int = 25
    users: int = 200
    days: int = 60
    change_day: int = 30
    change_share: float = 0.45


def tools_of(domain: str) -> tuple[str, ...]:
    return tuple(f"{domain}_{verb}" for verb in TOOL_VERBS)


def relevant_tools(domain: str, task: int) -> tuple[str, str]:
    tools = tools_of(domain)
    return tools[2 * task], tools[2 * task + 1]


def catalogue_quality(tool: str) -> float:
    """The static keyword quality of a tool's description, in [0, 1) (same for everyone)."""
    digest = hashlib.sha256(f"quality:{tool}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def uniform(*key: object) -> float:
    """A uniform [0, 1) number fixed by ``key`` (outcomes shared by every configuration)."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class Profile:
    """A user's hidden truth over one period (before or after their change)."""

    domains: dict[str, float]  # domain → share of tasks
    tasks: dict[str, tuple[float, float, float]]  # domain → task-type weights
    habits: dict[tuple[str, int], str]  # (domain, task type) → the tool the user wants
    success: dict[str, float]  # tool → true success probability for this user
    entities: dict[str, tuple[float, ...]]  # entity type → visit weights of its entities

    def task_share(self, domain: str, task: int) -> float:
        if domain not in self.tasks:
            return 0.0
        return self.domains.get(domain, 0.0) * self.tasks[domain][task]

    def p(self, tool: str) -> float:
        return self.success.get(tool, 1.0)


@dataclass(frozen=True)
class Task:
    domain: str
    task: int
    noise: tuple[float, ...]  # one per candidate, in ``tools_of(domain)`` order
    query: str

    def expected_scores(self) -> dict[str, float]:
        """The catalogue's scores of the candidates without the query's noise."""
        relevant = relevant_tools(self.domain, self.task)
        return {
            tool: catalogue_quality(tool) + (RELEVANCE_GAP if tool in relevant else 0.0)
            for tool in tools_of(self.domain)
        }

    def scores(self) -> dict[str, float]:
        """The catalogue search scores of the candidates for this query (no memory)."""
        expected = self.expected_scores()
        return {tool: s + n for (tool, s), n in zip(expected.items(), self.noise, strict=True)}


@dataclass(frozen=True)
class Session:
    user: int
    index: int  # the user's n-th session
    at_ms: int
    tasks: tuple[Task, ...]
    lookups: tuple[tuple[str, int], ...]  # (entity type, entity index)

    @property
    def day(self) -> int:
        return (self.at_ms - START_MS) // MS_PER_DAY


@dataclass(frozen=True)
class Change:
    kind: ChangeKind
    at_ms: int
    domain: str  # the task's domain (switch/break) or the domain left (move)
    task: int = 0
    abandoned: str = ""  # switch/break: tool A
    adopted: str = ""  # switch/break: tool B
    new_domain: str = ""  # move


@dataclass(frozen=True)
class User:
    index: int
    archetype: Archetype
    before: Profile
    after: Profile
    change: Change | None
    sessions: tuple[Session, ...] = field(default=())

    @property
    def user_id(self) -> str:
        return f"user-{self.index:04d}"

    def changed_by(self, at_ms: int) -> bool:
        return self.change is not None and at_ms >= self.change.at_ms

    def profile_at(self, at_ms: int) -> Profile:
        return self.after if self.changed_by(at_ms) else self.before

    def truth_at(self, at_ms: int) -> Truth:
        abandoned: frozenset[str] = frozenset()
        if self.change is not None and self.change.abandoned and self.changed_by(at_ms):
            abandoned = frozenset({self.change.abandoned})
        return truth_of(self.profile_at(at_ms), abandoned=abandoned)


# --- generation ------------------------------------------------------------------------------
def _pick(rng: random.Random, options: tuple[tuple[T, float], ...]) -> T:
    x = rng.random()
    for value, weight in options:
        x -= weight
        if x < 0:
            return value
    return options[-1][0]


def is_flaky(p: float) -> bool:
    low, high = FLAKY[1]
    return low <= p <= high


def _reliability(rng: random.Random) -> float:
    x = rng.random()
    for share, (low, high) in (RELIABLE, FLAKY, BROKEN):
        x -= share
        if x < 0:
            return rng.uniform(low, high)
    return rng.uniform(*BROKEN[1])


def _zipf_weights(n: int) -> tuple[float, ...]:
    raw = [1 / (k + 1) ** ZIPF_S for k in range(n)]
    total = sum(raw)
    return tuple(w / total for w in raw)


def _domain_part(
    rng: random.Random, domain: str, success: dict[str, float], habits: dict[tuple[str, int], str]
) -> tuple[float, float, float]:
    for tool in tools_of(domain):
        success[tool] = _reliability(rng)
    for task in range(TASKS_PER_DOMAIN):
        pair = list(relevant_tools(domain, task))
        rng.shuffle(pair)
        reliable = [t for t in pair if success[t] >= RELIABLE_P]
        habit = reliable[0] if reliable else pair[0]
        success[habit] = max(success[habit], rng.uniform(*RELIABLE[1]))
        habits[(domain, task)] = habit
    weights = list(TASK_WEIGHTS)
    rng.shuffle(weights)
    return (weights[0], weights[1], weights[2])


def _profile(rng: random.Random) -> Profile:
    n_domains = _pick(rng, DOMAINS_PER_USER)
    chosen = rng.sample(DOMAINS, n_domains)
    weights = list(DOMAIN_WEIGHTS[:n_domains])
    total = sum(weights)
    domains = {d: w / total for d, w in zip(chosen, weights, strict=True)}
    success: dict[str, float] = {}
    habits: dict[tuple[str, int], str] = {}
    tasks = {d: _domain_part(rng, d, success, habits) for d in chosen}
    first = _pick(rng, ENTITY_TYPE_WEIGHTS)
    types = [first]
    if rng.random() < 0.3:
        types.append(rng.choice([t for t in ENTITY_TOOLS if t != first]))
    weights_e = _zipf_weights(ENTITIES_PER_TYPE)
    entities = dict.fromkeys(types, weights_e)
    return Profile(domains=domains, tasks=tasks, habits=habits, success=success, entities=entities)


def _main_task(profile: Profile) -> tuple[str, int]:
    return max(
        ((d, k) for d in profile.tasks for k in range(TASKS_PER_DOMAIN)),
        key=lambda dk: (profile.task_share(*dk), dk),
    )


def _changed(rng: random.Random, before: Profile, at_ms: int) -> tuple[Profile, Change]:
    kind = _pick(rng, CHANGE_KINDS)
    domain, task = _main_task(before)
    if kind == "move":
        unused = [d for d in DOMAINS if d not in before.domains]
        new = rng.choice(unused)
        success = dict(before.success)
        habits = {k: v for k, v in before.habits.items() if k[0] != domain}
        tasks = {d: w for d, w in before.tasks.items() if d != domain}
        tasks[new] = _domain_part(rng, new, success, habits)
        domains = {(new if d == domain else d): w for d, w in before.domains.items()}
        after = replace(before, domains=domains, tasks=tasks, habits=habits, success=success)
        return after, Change(kind="move", at_ms=at_ms, domain=domain, new_domain=new)
    a = before.habits[(domain, task)]
    b = next(t for t in relevant_tools(domain, task) if t != a)
    success = dict(before.success)
    success[b] = max(success[b], rng.uniform(*RELIABLE[1]))
    if kind == "break":
        success[a] = rng.uniform(*BROKEN[1])
    habits = dict(before.habits)
    habits[(domain, task)] = b
    after = replace(before, habits=habits, success=success)
    change = Change(kind=kind, at_ms=at_ms, domain=domain, task=task, abandoned=a, adopted=b)
    return after, change


def _session_days(rng: random.Random, archetype: Archetype, days: int) -> list[int]:
    start = rng.randrange(7)
    out: list[int] = []
    if archetype == "daily":
        for day in range(start, days):
            weekend = (day + 3) % 7 >= 5  # day 0 is a Thursday
            if rng.random() < (0.15 if weekend else 0.85):
                out.append(day)
                if rng.random() < 0.25:
                    out.append(day)
    elif archetype == "weekly":
        out = [day for day in range(start, days) if rng.random() < 1.5 / 7]
    else:
        away_from = rng.randrange(start + 5, max(start + 6, days - 20))
        away_to = away_from + rng.randrange(10, 26)
        out = [
            day
            for day in range(start, days)
            if not away_from <= day < away_to and rng.random() < 0.6
        ]
    if not out:
        out = [start]
    return out


def _task(rng: random.Random, profile: Profile) -> Task:
    domain = str(rng.choices(list(profile.domains), weights=list(profile.domains.values()))[0])
    task = rng.choices(range(TASKS_PER_DOMAIN), weights=profile.tasks[domain])[0]
    noise = tuple(rng.gauss(0.0, SCORE_NOISE) for _ in TOOL_VERBS)
    query = f"Can you get me the {domain} {TASK_WORDS[task]} for this quarter?"
    return Task(domain=domain, task=task, noise=noise, query=query)


def _lookups(rng: random.Random, profile: Profile) -> tuple[tuple[str, int], ...]:
    n = _pick(rng, LOOKUPS_PER_SESSION)
    types = list(profile.entities)
    out = []
    for _ in range(n):
        etype = rng.choice(types)
        index = rng.choices(range(ENTITIES_PER_TYPE), weights=profile.entities[etype])[0]
        out.append((etype, index))
    return tuple(out)


def build_user(config: WorldConfig, index: int) -> User:
    rng = random.Random(f"{config.seed}:user:{index}")
    archetype = _pick(rng, ARCHETYPES)
    before = _profile(rng)
    change_ms = START_MS + config.change_day * MS_PER_DAY
    after, change = before, None
    if rng.random() < config.change_share:
        after, change = _changed(rng, before, change_ms)
    sessions: list[Session] = []
    last = -1
    for day in _session_days(rng, archetype, config.days):
        at = START_MS + day * MS_PER_DAY + rng.randrange(8 * 3_600_000, 18 * 3_600_000)
        at = max(at, last + 60_000)  # a second session that day comes after the first
        last = at
        profile = after if change is not None and at >= change.at_ms else before
        n_tasks = _pick(rng, TASKS_PER_SESSION)
        tasks = tuple(_task(rng, profile) for _ in range(n_tasks))
        sessions.append(
            Session(
                user=index,
                index=len(sessions),
                at_ms=at,
                tasks=tasks,
                lookups=_lookups(rng, profile),
            )
        )
    return User(
        index=index,
        archetype=archetype,
        before=before,
        after=after,
        change=change,
        sessions=tuple(sessions),
    )


def build_world(config: WorldConfig) -> list[User]:
    return [build_user(config, i) for i in range(config.users)]


def entity_id(etype: str, index: int) -> str:
    return f"{etype[:3].upper()}-{index:03d}"


def entity_name(etype: str, index: int) -> str:
    return f"{etype.replace('_', ' ').title()} {index:03d}"


# --- the true profile ------------------------------------------------------------------------
def _at_least_once(share: float, counts: tuple[tuple[int, float], ...]) -> float:
    """P(something with per-draw probability ``share`` happens in a session of n draws)."""
    return sum(w * (1 - (1 - share) ** n) for n, w in counts)


@dataclass(frozen=True)
class Truth:
    """What a fact about this user should say, by fact subject: ``core`` facts are what the
    user does in at least ``CORE_USAGE`` of sessions (the prompt should have them), ``false``
    ones contradict the profile (it should not), anything else is incidental (not counted)."""

    core: frozenset[str]
    false: frozenset[str]

    def label(self, subject: str) -> str:
        if subject in self.core:
            return "core"
        if subject in self.false:
            return "false"
        return "incidental"


def domain_of(tool: str) -> str:
    return tool.split("_", 1)[0]


def truth_of(profile: Profile, *, abandoned: frozenset[str] = frozenset()) -> Truth:
    """The labels of every fact a user of ``profile`` could have (``abandoned``: tools the user
    gave up, which no longer "work well for this user" even if they still run)."""
    core: set[str] = set()
    false: set[str] = set()
    habit_use: dict[str, float] = {}
    relevant_use: dict[str, float] = {}
    for domain in DOMAINS:
        share = profile.domains.get(domain, 0.0)
        subject = f"domain_preference:{domain}"
        if share == 0.0:
            false.add(subject)
        elif _at_least_once(share, TASKS_PER_SESSION) >= CORE_USAGE:
            core.add(subject)
        for task in range(TASKS_PER_DOMAIN):
            usage = _at_least_once(profile.task_share(domain, task), TASKS_PER_SESSION)
            if usage == 0.0:
                continue
            habit = profile.habits[(domain, task)]
            habit_use[habit] = max(habit_use.get(habit, 0.0), usage)
            for tool in relevant_tools(domain, task):
                relevant_use[tool] = max(relevant_use.get(tool, 0.0), usage)
    for domain in DOMAINS:
        for tool in tools_of(domain):
            works = profile.p(tool) >= RELIABLE_P
            current = domain in profile.domains
            affinity, avoidance = f"tool_affinity:{tool}", f"tool_avoidance:{tool}"
            if not works or not current or tool in abandoned:
                false.add(affinity)
            elif habit_use.get(tool, 0.0) >= CORE_USAGE:
                core.add(affinity)
            if works:
                false.add(avoidance)
            elif current and relevant_use.get(tool, 0.0) >= CORE_USAGE:
                core.add(avoidance)
    for etype, tool in ENTITY_TOOLS.items():
        weights = profile.entities.get(etype)
        false.add(f"tool_avoidance:{tool}")
        if weights is None:
            false.add(f"tool_affinity:{tool}")
            continue
        core.add(f"tool_affinity:{tool}")
        per_type = 1 / len(profile.entities)
        for index, weight in enumerate(weights):
            if _at_least_once(per_type * weight, LOOKUPS_PER_SESSION) >= CORE_USAGE:
                core.add(f"entity_frequency:{etype}:{entity_id(etype, index)}")
    return Truth(core=frozenset(core), false=frozenset(false))
