"""Type stubs of the extension module ``cdp_supervisor._native`` (the Rust binding).

Everything here is re-exported by :mod:`cdp_supervisor` (``FakeBrowser`` by
:mod:`cdp_supervisor.testing`); import it from there.
"""

from os import PathLike
from pathlib import Path
from types import TracebackType
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, Union, final

__all__ = [
    "Config",
    "SupervisorRegistry",
    "Supervisor",
    "CdpEndpoint",
    "Snapshot",
    "PendingDialog",
    "ClosedDialog",
    "FrameTree",
    "FrameEntry",
    "ConsoleEntry",
    "Blocked",
    "PageInfo",
    "Download",
    "FileChooser",
    "FakeBrowser",
    "_call_tool",
    "_bench_detect_rust",
    "_error_samples",
    "__version__",
    "DIALOG_BRIDGE_HOST",
    "CONFIG_KEYWORDS",
]

__version__: str
DIALOG_BRIDGE_HOST: str
CONFIG_KEYWORDS: List[str]

_ConfigValue = Union[str, int, float, bool, List[str], Tuple[str, ...], "PathLike[str]", None]

@final
class Config:
    """Settings of a registry: ``config/default.toml`` with the keywords given over it.

    Every keyword is a setting of that file (its section left out); values are validated by
    the same code as a TOML file, and an invalid one raises :class:`~cdp_supervisor.ConfigError`
    naming the key, the value and what is allowed.
    """

    def __new__(
        cls,
        *,
        dialog_policy: Optional[str] = ...,
        dialog_timeout_s: Optional[float] = ...,
        dialog_bridge: Optional[str] = ...,
        cdp_url: Optional[str] = ...,
        chrome_path: Optional[Union[str, "PathLike[str]"]] = ...,
        follow_popups: Optional[bool] = ...,
        capture_console: Optional[bool] = ...,
        chrome_args: Optional[Union[List[str], Tuple[str, ...]]] = ...,
        ca_file: Optional[Union[str, "PathLike[str]"]] = ...,
        start_timeout_s: Optional[float] = ...,
        call_timeout_s: Optional[float] = ...,
        reconnect_attempts: Optional[int] = ...,
        frame_tree_max_entries: Optional[int] = ...,
        frame_tree_max_oopif_depth: Optional[int] = ...,
        recent_dialogs_max: Optional[int] = ...,
        console_errors_max: Optional[int] = ...,
        max_message_bytes: Optional[int] = ...,
        pending_dialogs_max: Optional[int] = ...,
        pages_max: Optional[int] = ...,
        watched_pages_max: Optional[int] = ...,
        allow_file_urls: Optional[bool] = ...,
        allow_file_access: Optional[bool] = ...,
        allow_page_protocol: Optional[bool] = ...,
        cdp_deny: Optional[Union[List[str], Tuple[str, ...]]] = ...,
        cdp_allow: Optional[Union[List[str], Tuple[str, ...]]] = ...,
        upload_dirs: Optional[Union[List[str], Tuple[str, ...]]] = ...,
        dir: Optional[Union[str, "PathLike[str]"]] = ...,
        keep: Optional[bool] = ...,
        isolate_tasks: Optional[bool] = ...,
        listen: Optional[str] = ...,
        all_targets: Optional[bool] = ...,
        allowed_origins: Optional[Union[List[str], Tuple[str, ...]]] = ...,
    ) -> "Config": ...
    @staticmethod
    def load(path: Optional[Union[str, "PathLike[str]"]] = None) -> Config:
        """The defaults, then ``path`` (or ``$CDP_SUPERVISOR_CONFIG``), then the
        ``CDP_SUPERVISOR__SECTION__KEY`` environment."""
    @staticmethod
    def from_toml(toml: str) -> Config:
        """The defaults with a TOML document over them."""
    @property
    def dialog_policy(self) -> str: ...
    @property
    def dialog_timeout_s(self) -> float: ...
    @property
    def dialog_bridge(self) -> str: ...
    @property
    def cdp_url(self) -> Optional[str]:
        """The configured endpoint, credentials redacted."""
    @property
    def follow_popups(self) -> bool: ...
    @property
    def capture_console(self) -> bool:
        """Console errors and exceptions captured (``Runtime.enable``: a page can tell)."""
    @property
    def chrome_args(self) -> List[str]:
        """Extra flags of a browser the registry launches."""
    @property
    def start_timeout_s(self) -> float: ...
    @property
    def call_timeout_s(self) -> float: ...
    @property
    def reconnect_attempts(self) -> int: ...
    @property
    def allow_file_urls(self) -> bool: ...
    @property
    def allow_file_access(self) -> bool: ...
    @property
    def allow_page_protocol(self) -> bool: ...
    @property
    def cdp_deny(self) -> List[str]: ...
    @property
    def cdp_allow(self) -> List[str]: ...
    @property
    def upload_dirs(self) -> List[Path]:
        """``security.upload_dirs``: where a file chooser's files may come from."""
    @property
    def downloads_dir(self) -> Optional[Path]:
        """``downloads.dir`` (``None``: the system temp directory)."""
    @property
    def keep_downloads(self) -> bool:
        """``downloads.keep``."""
    @property
    def isolate_tasks(self) -> bool:
        """A task reaches only its own pages (``security.isolate_tasks``, default true)."""
    def __eq__(self, other: object, /) -> bool: ...

@final
class PendingDialog:
    """A dialog waiting for an answer. Frozen."""

    @property
    def id(self) -> str:
        """``d-1``, ``d-2``, ... per supervisor."""
    @property
    def type(self) -> str:
        """``alert``, ``confirm``, ``prompt`` or ``beforeunload``."""
    @property
    def message(self) -> str: ...
    @property
    def default_prompt(self) -> str: ...
    @property
    def opened_at(self) -> float:
        """Unix epoch seconds."""
    @property
    def frame_id(self) -> Optional[str]: ...
    @property
    def url(self) -> str: ...
    @property
    def origin(self) -> str:
        """The opening frame's origin (tell the page's own prompt from an ad's)."""
    @property
    def target_id(self) -> str:
        """The page (the task's, or a popup it follows) that raised it."""
    @property
    def session_id(self) -> str:
        """The CDP session it arrived on."""
    @property
    def bridge_request_id(self) -> Optional[str]:
        """Set when the dialog bridge caught it: the paused request it waits on."""
    def to_dict(self) -> Dict[str, Any]:
        """As ``browser_snapshot`` shows it."""

@final
class ClosedDialog:
    """A closed dialog in ``recent_dialogs``. Frozen."""

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def default_prompt(self) -> str: ...
    @property
    def opened_at(self) -> float: ...
    @property
    def closed_at(self) -> float: ...
    @property
    def closed_by(self) -> str:
        """``agent``, ``auto_policy``, ``watchdog``, ``remote``, ``connection_lost``, ``client`` (a
        client of the task's CDP endpoint) or ``human`` (a person, on the supervisor page)."""
    @property
    def frame_id(self) -> Optional[str]: ...
    @property
    def origin(self) -> str: ...
    @property
    def target_id(self) -> str: ...
    @property
    def accepted(self) -> Optional[bool]: ...
    @property
    def user_input(self) -> Optional[str]: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class FrameEntry:
    """A frame. Frozen."""

    @property
    def frame_id(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def origin(self) -> str: ...
    @property
    def is_oopif(self) -> bool:
        """An out-of-process iframe (it has a CDP session of its own)."""
    @property
    def session_id(self) -> Optional[str]:
        """The OOPIF's CDP session (a routing detail: ``to_dict()`` leaves it out)."""
    @property
    def parent_frame_id(self) -> Optional[str]: ...
    @property
    def name(self) -> Optional[str]: ...
    @property
    def crashed(self) -> bool: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class FrameTree:
    """The page's main frame and the other frames breadth-first, capped. Frozen."""

    @property
    def top(self) -> Optional[FrameEntry]: ...
    @property
    def children(self) -> Tuple[FrameEntry, ...]: ...
    @property
    def truncated(self) -> bool: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class ConsoleEntry:
    """A console error/warning or uncaught exception. Frozen."""

    @property
    def ts(self) -> float: ...
    @property
    def level(self) -> str:
        """``error``, ``assert``, ``warning`` or ``exception``."""
    @property
    def text(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def frame_id(self) -> Optional[str]: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class Blocked:
    """Why the page (or a frame) cannot be used. Frozen."""

    @property
    def reason(self) -> str:
        """``orphaned_dialog``, ``unresponsive``, ``unanswerable_dialog`` or
        ``dialog_in_unfollowed_page``."""
    @property
    def hint(self) -> str: ...
    @property
    def frame_id(self) -> Optional[str]: ...
    @property
    def target_ids(self) -> List[str]:
        """For ``dialog_in_unfollowed_page``: the pages to close (one shows the dialog); for
        ``unresponsive``, a page the task follows that has not answered since it was attached;
        for ``orphaned_dialog`` on the page, the pages it opened (one may show the dialog)."""
    def to_dict(self) -> Dict[str, Any]: ...

@final
class PageInfo:
    """A page the task follows (its own first, then popups). Frozen."""

    @property
    def target_id(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def opener_target_id(self) -> Optional[str]: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class Download:
    """A download of the task's pages. Frozen."""

    @property
    def guid(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def suggested_filename(self) -> str: ...
    @property
    def state(self) -> str:
        """``in_progress``, ``completed`` or ``canceled`` (a failed download is ``canceled``)."""
    @property
    def received_bytes(self) -> int: ...
    @property
    def total_bytes(self) -> Optional[int]: ...
    @property
    def path(self) -> Optional[str]:
        """Once completed: the file, in the task's download directory."""
    @property
    def frame_id(self) -> Optional[str]: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class FileChooser:
    """A file chooser a page opened, waiting for files (with ``allow_file_access``). Frozen."""

    @property
    def id(self) -> str:
        """``fc-1``, ``fc-2``, ..."""
    @property
    def mode(self) -> str:
        """``single`` or ``multiple``."""
    @property
    def frame_id(self) -> Optional[str]: ...
    @property
    def backend_node_id(self) -> int:
        """The ``<input type=file>`` element."""
    @property
    def opened_at(self) -> float: ...
    @property
    def target_id(self) -> str: ...
    def to_dict(self) -> Dict[str, Any]:
        """As ``browser_snapshot`` lists it among ``pending_dialogs``."""

@final
class Snapshot:
    """One published state of a supervisor. Frozen; ``Supervisor.snapshot()`` returns the same
    object until the supervisor publishes a new state."""

    @property
    def task_id(self) -> str: ...
    @property
    def cdp_url(self) -> str:
        """Credentials redacted."""
    @property
    def active(self) -> bool: ...
    @property
    def state(self) -> str:
        """``active``, ``reconnecting``, ``stopped`` or ``dead``."""
    @property
    def attempt(self) -> Optional[int]:
        """While reconnecting: the attempt under way (1-based)."""
    @property
    def of(self) -> Optional[int]:
        """While reconnecting: how many attempts there may be."""
    @property
    def reason(self) -> Optional[str]:
        """Why the connection is down, or why the supervisor ended."""
    @property
    def page_target_id(self) -> Optional[str]: ...
    @property
    def page_session_id(self) -> Optional[str]: ...
    @property
    def pending_dialogs(self) -> Tuple[PendingDialog, ...]: ...
    @property
    def recent_dialogs(self) -> Tuple[ClosedDialog, ...]: ...
    @property
    def frame_tree(self) -> FrameTree: ...
    @property
    def pages(self) -> Tuple[PageInfo, ...]: ...
    @property
    def pages_truncated(self) -> bool: ...
    @property
    def console_errors(self) -> Tuple[ConsoleEntry, ...]: ...
    @property
    def blocked(self) -> Optional[Blocked]: ...
    @property
    def crashed(self) -> bool: ...
    @property
    def downloads(self) -> Tuple[Download, ...]:
        """The task's downloads, newest last."""
    @property
    def file_choosers(self) -> Tuple[FileChooser, ...]:
        """File choosers waiting for files."""
    @property
    def file_chooser_refused(self) -> Optional[Dict[str, Any]]:
        """The last file chooser the policy kept from the agent (with the option that allows
        it), or ``None``."""
    @property
    def page_replaced(self) -> Optional[str]:
        """The task's own page that was gone after a reconnect (a new one was made)."""
    @property
    def handover(self) -> Optional[Dict[str, Any]]:
        """Whether a person holds the task: ``{"held", "held_since"?, "ended_holds_s", "holds"}``
        (``held_since`` while held, Unix epoch seconds; the total held time is ``ended_holds_s``
        plus ``now - held_since`` while held); ``None`` until it is first handed over."""
    @property
    def version(self) -> int:
        """Increases with every publish."""
    def to_dict(self) -> Dict[str, Any]:
        """As ``browser_snapshot`` shows it."""
    def to_json(self) -> str: ...
    def find_frame(self, frame_id: str) -> Optional[FrameEntry]:
        """Any frame the supervisor knows (not only the capped ``frame_tree``)."""

@final
class CdpEndpoint:
    """Where CDP clients connect to a task (from ``Supervisor.cdp_endpoint()``); frozen. Its
    ``repr`` hides the token."""

    @property
    def ws_url(self) -> str:
        """``ws://HOST:PORT/<token>/devtools/browser/<id>``: a browser WebSocket URL
        (Puppeteer's ``browserWSEndpoint``)."""
    @property
    def http_url(self) -> str:
        """``http://HOST:PORT/<token>``: answers ``/json/version`` (naming ``ws_url``),
        ``/json/list`` and ``/json`` (Playwright's ``connect_over_cdp``, Puppeteer's
        ``browserURL``)."""
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Supervisor:
    """One task's persistent CDP connection (from ``SupervisorRegistry.get_or_start``).

    In a child of ``os.fork()`` it raises :class:`~cdp_supervisor.UsedAfterFork` (all but
    ``task_id`` and ``cdp_url``) and touches nothing of the parent's."""

    def snapshot(self) -> Snapshot:
        """The latest state: wait-free, and the same object while nothing changed."""
    def respond_to_dialog(
        self,
        action: str,
        prompt_text: Optional[str] = None,
        dialog_id: Optional[str] = None,
    ) -> PendingDialog:
        """Answers a pending dialog (``action``: ``"accept"`` or ``"dismiss"``) and waits for
        the browser's acknowledgement. ``dialog_id`` may be left out when one dialog is pending;
        accepting a prompt without ``prompt_text`` returns its default text. Returns the dialog
        answered."""
    def call(
        self,
        method: str,
        params: Optional[Dict[str, Any]] = None,
        *,
        target_id: Optional[str] = None,
        frame_id: Optional[str] = None,
        timeout_s: Optional[float] = None,
    ) -> Any:
        """A CDP call and its result: into ``frame_id`` (any frame, cross-origin iframes
        included), ``target_id`` (the page, a popup, an iframe target), or by the method's
        domain. Raises :class:`~cdp_supervisor.BlockedByDialog` at once when a dialog blocks
        it, :class:`~cdp_supervisor.CdpError` for the browser's error, :class:`~cdp_supervisor.Timeout`
        after ``timeout_s`` (default ``call_timeout_s``)."""
    def wait_for_dialog(self, timeout_s: float) -> Optional[PendingDialog]:
        """The first pending dialog as soon as there is one; ``None`` after ``timeout_s`` or
        when the supervisor has ended."""
    def navigate(
        self, url: str, wait_until: str = "load", timeout_s: Optional[float] = None
    ) -> Dict[str, Any]:
        """Navigates the task's page (brought to the front first) and waits for ``wait_until``
        (``"commit"`` or ``"load"``): ``{"url", "frame_id", "loader_id"}``. A dialog that opens
        before then raises :class:`~cdp_supervisor.BlockedByDialog` at once; a network error
        :class:`~cdp_supervisor.NavigationFailed`; a URL the policy refuses
        :class:`~cdp_supervisor.SecurityPolicy`."""
    def wait_for_navigation(
        self, wait_until: str = "load", timeout_s: Optional[float] = None
    ) -> Dict[str, Any]:
        """Waits for the latest ``navigate`` again (after its dialog was answered)."""
    def tab_ref(self, timeout_s: Optional[float] = None) -> str:
        """The task's page as agent-browser numbers tabs: ``"tN"``, N its 1-based position
        among the browser's page targets in ``Target.getTargets`` order, ``devtools://`` pages
        not counted. Asked of the browser itself: a raw ``Target.getTargets`` through ``call``
        lists only the task's own targets (``isolate_tasks``)."""
    def wait_for_download(self, timeout_s: float = 30.0) -> Download:
        """The next download no earlier call returned, once it ended (``state`` says how);
        raises :class:`~cdp_supervisor.NoDownload` when none began within about 2 s."""
    def respond_to_file_chooser(
        self, files: Sequence[Union[str, "PathLike[str]"]], chooser_id: Optional[str] = None
    ) -> FileChooser:
        """Answers a pending file chooser with files inside ``upload_dirs`` (needs
        ``allow_file_access``; :class:`~cdp_supervisor.SecurityPolicy` otherwise)."""
    def dismiss_file_chooser(self, chooser_id: Optional[str] = None) -> FileChooser:
        """Dismisses a pending file chooser (the page gets no file)."""
    def hand_over(self) -> Dict[str, Any]:
        """Hands the task over to a person: from then on no dialog policy or watchdog answers its
        dialogs, no automatic command reaches its pages, and the agent's calls (``call``,
        ``navigate``, ``respond_to_dialog``, file choosers) raise
        :class:`~cdp_supervisor.HeldByHuman`. Idempotent. Returns the hand-over state, as
        ``Snapshot.handover``."""
    def take_back(self) -> Dict[str, Any]:
        """Gives the task back to the agent; a dialog still pending gets the task's policy again
        (``must_respond``: a fresh ``dialog_timeout_s``). Idempotent. Returns the hand-over
        state."""
    @property
    def is_held(self) -> bool:
        """A person holds the task."""
    def respond_as_human(
        self,
        action: str,
        prompt_text: Optional[str] = None,
        dialog_id: Optional[str] = None,
    ) -> PendingDialog:
        """``respond_to_dialog`` for a person: recorded as ``closed_by == "human"``, allowed
        whether or not the task is held."""
    def thumbnail(self) -> Dict[str, Any]:
        """A small JPEG of the task's page: ``{"jpeg": bytes, "width", "height", "taken_at",
        "target_id"}``, at most 320 pixels wide, taken at most once a second (the same picture
        within that second). Raises :class:`~cdp_supervisor.CannotCapture` saying why there is
        none (at once while a dialog is open: Chromium paints nothing until it is answered)."""
    def cdp_endpoint(self) -> CdpEndpoint:
        """The task's CDP endpoint: any CDP client (Puppeteer, Playwright's
        ``connect_over_cdp``, a raw WebSocket) connects to it as if it were the browser, and is
        carried over this supervisor's one connection (it sees the task's pages only; a call
        into a page a dialog blocks fails at once naming the dialog). The registry's listener
        starts on the first call, where the ``listen`` setting says. The URLs carry a secret
        token: treat them like a password. Raises :class:`~cdp_supervisor.NotActive` once the
        supervisor is stopped."""
    @property
    def download_dir(self) -> Optional[str]:
        """The task's download directory."""
    def stop(self) -> None:
        """Dismisses pending dialogs, closes the connection, joins the threads (< 1 s)."""
    @property
    def state(self) -> str:
        """``active``, ``reconnecting``, ``stopped`` or ``dead``."""
    @property
    def is_alive(self) -> bool: ...
    @property
    def is_active(self) -> bool: ...
    @property
    def task_id(self) -> str: ...
    @property
    def cdp_url(self) -> str:
        """Credentials redacted."""
    @property
    def page_target_id(self) -> Optional[str]: ...

@final
class SupervisorRegistry:
    """One supervisor per task. ``with SupervisorRegistry() as reg:`` closes it at the end
    (every task stopped, a browser it launched closed).

    In a child of ``os.fork()`` it raises :class:`~cdp_supervisor.UsedAfterFork` (all but
    ``config``) and touches nothing of the parent's: make a new registry in the child."""

    def __new__(cls, config: Optional[Config] = None) -> "SupervisorRegistry": ...
    @property
    def config(self) -> Config: ...
    def get_or_start(
        self,
        task_id: str,
        cdp_url: Optional[str] = None,
        *,
        target_id: Optional[str] = None,
        dialog_policy: Optional[str] = None,
        dialog_timeout_s: Optional[float] = None,
        dialog_bridge: Optional[str] = None,
        start_timeout_s: Optional[float] = None,
        own_page: bool = False,
        new_page: bool = False,
        page_choice: Optional[str] = None,
    ) -> Supervisor:
        """The task's live supervisor for ``cdp_url`` (``ws://``, ``wss://`` or ``http://``),
        starting one when there is none, when it died, or when the URL or options changed.
        The same object for the same task and URL. Without ``cdp_url`` (nor ``cdp_url`` in the
        config) it launches a local headless Chromium and gives the task a page of its own.
        ``own_page``: a fresh ``about:blank`` page of the task's own, never an existing one,
        re-attached after a reconnect while it exists and closed at stop (``new_page`` is its
        old name). ``page_choice`` says which existing page a task that names none and owns
        none takes: ``"first_usable"`` (the default: the first page with a web URL) or
        ``"first_listed"`` (the first page the browser lists, whatever its URL; one that is
        gone by the time it is attached is passed over). A ``stop`` of the task or a ``close`` from another thread cuts it short
        (:class:`~cdp_supervisor.StartCancelled`); a closed registry raises
        :class:`~cdp_supervisor.RegistryClosed`."""
    def get(self, task_id: str) -> Optional[Supervisor]: ...
    def snapshot(self, task_id: str) -> Optional[Snapshot]: ...
    def stop(self, task_id: str) -> bool:
        """Stops the task's supervisor, or cuts its start in progress short (the start raises
        :class:`~cdp_supervisor.StartCancelled` at once); whether there was either."""
    def stop_all(self) -> None:
        """``stop`` for every task."""
    def close(self) -> None:
        """``stop_all``, close the browser this registry launched (a launch in progress gives
        up), and refuse every later start (:class:`~cdp_supervisor.RegistryClosed`).
        Idempotent."""
    def tasks(self) -> List[str]: ...
    def __enter__(self) -> SupervisorRegistry: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

@final
class FakeBrowser:
    """A scripted fake CDP browser on loopback (the Rust crate's ``fake::FakeBrowser``): one
    page target, enough CDP to attach, and dialogs on demand. In a child of ``os.fork()`` its
    methods raise :class:`~cdp_supervisor.UsedAfterFork` (its URLs still read: the parent's
    fake still answers them)."""

    def __init__(self) -> None: ...
    @property
    def ws_url(self) -> str: ...
    @property
    def http_url(self) -> str: ...
    @property
    def page_target_id(self) -> str: ...
    def open_dialog(self, kind: str, message: str, default_prompt: str = "") -> None:
        """The page opens a dialog (``alert``, ``confirm``, ``prompt``, ``beforeunload``)."""
    def dialog_open(self) -> bool: ...
    def close_dialog_remotely(self) -> None:
        """Something else closes the open dialog."""
    def emit_on_page(self, method: str, params: Optional[Dict[str, Any]] = None) -> None:
        """Sends a CDP event on every attached page session."""
    def ignore(self, method: str) -> None:
        """From now on ``method`` gets no answer (a browser that hangs)."""
    def set_reply(self, method: str, result: Dict[str, Any]) -> None:
        """From now on ``method`` is answered with ``result``."""
    def set_error(self, method: str, code: int, message: str) -> None:
        """From now on ``method`` is answered with a CDP error."""
    def clear_rule(self, method: str) -> None:
        """``method`` gets the built-in answer again."""
    def received(self) -> List[Dict[str, Any]]:
        """Every command received, oldest first."""
    def close(self) -> None: ...
    def __enter__(self) -> FakeBrowser: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

def _call_tool(registry: SupervisorRegistry, name: str, arguments: Dict[str, Any]) -> str: ...
def _bench_detect_rust(fake: FakeBrowser, sup: Supervisor, samples: int) -> List[int]: ...
def _error_samples(dialog: PendingDialog) -> List[Tuple[str, BaseException]]: ...
