"""What a group talks about and who shares what (design 001 §8.4, issue 36): topics over time and the member graph,
computed from the group's memories (members' and the group's, archived ones counted apart) and episode summaries,
without a model call, in the background.

Public use (the statistics tab, `/memory stats`, the export):

    served = await service.topics.result(key, view=View.ADMIN, wait=1.5)   # `Keeper.result` -> `Served`
    served.analysis       # GroupAnalysis | None (None: not computed yet; `served.computing` says it is coming)
    served.fresh          # computed from the group's latest change (else the previous result, being recomputed)
    served.analysis.to_dict()   # JSON form: the export's `topics` section, the page's payload

- `GroupAnalysis` (`results.py`): `topics` (largest first, the rest, id "other", last), `graph`, counts of what was
  read (`memories`, `episodes`, `archived`, `excluded_members`), `computed_at`, `generation`, `zone`, `seconds`.
  `for_group()` (or `view=View.GROUP`) is what may be said in the group: labels only from words a group memory or
  an episode holds or at least two private memories share (never one memory's own), no private memory id anywhere,
  no entity names on edges; the group's line is worded by `_manage/topics.stats_line`.
- `Topic`: `id` (stable: the id of the previous result's topic that held most of its items, else a hash of its
  anchor term), `label` ("支付服务 · 上线 · 回滚预案", or the model's "支付服务发版" when `named_by_model`; "" when the
  group view has nothing public to name it by: say "话题 N"), `terms`, `size` (live items), `archived`, `members` (user ids of
  members with their OWN memories in it, most first: an episode counts toward size and timeline, adds no member),
  `memory_ids` (live memories and episode ids, newest first), `archived_ids`, `private_ids` (members' own memories: the page shows them to admins only), `timeline` (`Week`: ISO `week` in the plugin's zone, `start`,
  `new`, `used` (items whose LAST use falls in the week), `faded`; see `timeline.py`), `first_at`, `last_at`.
- `Graph`: `nodes` (`Node`: `member` user id, `memories`, `episodes`, `topics`) and `edges` (`Edge`: `a` < `b`,
  `weight`, `topics`, `entities`, `mentions`, `episodes`, `memory_ids` behind it); weights in `graph.py`.
  Ids only: the caller shows names (`MemberDirectory.display_name`), never bare ids.

Privacy: opted-out members (in the group or every group of the platform) are read nowhere, nor is any episode they
took part in (`items.py`); erased ones
are gone from the data already. How topics are made: `topics.py`; what a text's terms are: `terms.py`; when results
are computed again and what they cost: `keeper.py`; the names the extraction model may write for topics (with
background extraction on; from the group view only, so `/memory stats` says them too): `labels.py`. Layer: a feature (recall's tokenizer and entity patterns,
privacy, storage, models); the composition root owns the one `Keeper` (`Components.topics`).
"""

from .analyse import analyse
from .items import Snapshot, load, snapshot
from .keeper import Keeper, Served
from .results import OTHER, Edge, Graph, GroupAnalysis, Kind, Node, Topic, View, Week

__all__ = [
    "OTHER",
    "Edge",
    "Graph",
    "GroupAnalysis",
    "Keeper",
    "Kind",
    "Node",
    "Served",
    "Snapshot",
    "Topic",
    "View",
    "Week",
    "analyse",
    "load",
    "snapshot",
]
