"""A Rerun view of an episode: what the model saw, said and did, and what the robot did, on one
timeline. Built from the episode log's records, so the live view (`run --view`, `bench --view`)
and a finished run's view (`pear-agent view RUN_DIR`) are the same code and show the same thing.

Rerun (`rerun-sdk`, the `view` extra) is imported only here and only when a view is asked for:
without `--view` nothing of this module runs.

Entities (timelines `turn` and `sim_time`; the images, state and joints at the turn's observation,
the reply at the decision, the outcome when the move ended):

- `cameras/<name>`: every image the model got (the JPEG bytes it got, not re-encoded)
- `world/robot/links`, `world/robot/skeleton`, `world/robot/axes`: the robot's link frames from its
  model file, posed by the measured joints (so the arm moves on screen)
- `world/<part>/tool`, `world/<part>/target`, `world/<part>/command`: tool point, commanded target,
  and the arrow from one to the other (metres, the robot base at the origin)
- `joints/<part>/<joint>/position_rad` and `.../velocity_rad_s` (finite difference between turns)
- `model/prompt`, `model/reply`, `model/action`: each turn's text, reply and parsed action
- `decision/latency_s`: the decision time of each turn
- `events`: clipping notes, refusals, invalid replies, the end of the episode
- roadster: `world/aircraft` (pose from every telemetry row), `world/road`, `world/ramp` or
  `world/truck`, `telemetry/<field>` series and `telemetry/row` (the line the model saw)
"""

from __future__ import annotations

import json
import logging
import math
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.records.log import read_log
from pear_agent.robot.loader import load_robot

log = logging.getLogger(__name__)

RRD_NAME = "episode.rrd"


class ViewUnavailable(ValueError):
    """Rerun is not installed (a ValueError: the CLI prints it as one line)."""


def require_rerun() -> Any:
    """The `rerun` module, or a clear message on how to get it."""
    try:
        import rerun as rr  # optional: rerun
    except ImportError:
        raise ViewUnavailable(
            "--view needs Rerun: pip install 'pear-agent[view]' (or pip install rerun-sdk)"
        ) from None
    return rr


def _rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))  # fmt: skip
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


class LinkPoser:
    """World poses of a robot's moving links for given joint angles (Pinocchio, from the same
    model the runtime's kinematics built from the robot's model file)."""

    def __init__(self, kinematics: Any) -> None:
        import pinocchio as pin  # heavy: pinocchio

        self._pin, self.kin = pin, kinematics
        model = kinematics.model
        self.model, self.data = model, model.createData()
        # the bodies that hang from a joint (the ones that move), and their parent body frames
        self.frames = [
            i
            for i, f in enumerate(model.frames)
            if f.type == pin.FrameType.BODY and f.parentJoint > 0 and not f.name.startswith("pear/")
        ]
        self.names = [model.frames[i].name for i in self.frames]
        index = {fid: k for k, fid in enumerate(self.frames)}
        self.parent: list[int] = []
        for fid in self.frames:
            p = model.frames[fid].parentFrame
            while p > 0 and p not in index:
                p = model.frames[p].parentFrame
            self.parent.append(index.get(p, -1))

    def poses(self, joints_rad: dict[str, list[float]]) -> tuple[np.ndarray, np.ndarray]:
        """(N x 3 positions in m, N x 3 x 3 rotations) of the links."""
        pin, kin = self._pin, self.kin
        q = kin._q.copy()
        for part, chain in kin.chains.items():
            if part in joints_rad:
                q[chain.idx_q] = np.asarray(joints_rad[part], dtype=float) - chain.ref
        pin.forwardKinematics(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        placements = [self.data.oMf[i] for i in self.frames]
        pos = np.array([m.translation for m in placements]).reshape(-1, 3)
        rot = np.array([m.rotation for m in placements]).reshape(-1, 3, 3)
        return pos, rot


def _kinematics_for(robot: str) -> Any | None:
    """The robot's kinematics from its description (by name), or None if it is not one of ours
    (a finished run's view then has the tool points but no links)."""
    try:
        from pear_agent.robot.kinematics import Kinematics  # heavy: pinocchio

        return Kinematics(load_robot(robot))
    except Exception as exc:  # an unknown or hardware-only robot: no link frames
        log.info("view: no link frames for robot %r: %s", robot, exc)
        return None


class EpisodeView:
    """A Rerun recording of one episode, fed the episode log's records as they are written
    (`RunWriter.observers`) or read back from an `episode.jsonl`.

    Sinks: always the `.rrd` file; `spawn=True` also a native viewer; `web_port` also a gRPC server
    with Rerun's web viewer on that port (for a headless robot computer: open the printed URL)."""

    def __init__(
        self,
        rrd_path: Path,
        *,
        run_dir: Path | None = None,
        kinematics: Any | None = None,
        spawn: bool = False,
        web_port: int | None = None,
        grpc_port: int | None = None,
        recording_id: str | None = None,
    ) -> None:
        rr = require_rerun()
        self.rr = rr
        self.rrd_path = Path(rrd_path)
        self.run_dir = Path(run_dir) if run_dir is not None else self.rrd_path.parent
        self.rec = rr.RecordingStream("pear-agent", recording_id=recording_id or self.run_dir.name)
        sinks: list[Any] = [rr.FileSink(str(self.rrd_path))]
        self.web_url: str | None = None
        if web_port is not None:
            server = rr.GrpcServerSink(port=grpc_port or 9876)
            sinks.append(server)
        if spawn:
            rr.spawn(connect=False)
            sinks.append(rr.GrpcSink())
        self.rec.set_sinks(*sinks)
        if web_port is not None:
            uri = server.uri
            rr.serve_web_viewer(web_port=web_port, open_browser=False, connect_to=uri)
            # the server listens on every interface: from another computer use this one's name
            here = uri.replace("0.0.0.0", "127.0.0.1")
            self.web_url = f"http://127.0.0.1:{web_port}/?url={urllib.parse.quote(here, safe=':/')}"
        self._kin = kinematics
        self._poser: LinkPoser | None = None
        self._parts_joints: dict[str, list[str]] = {}
        self._last_t_s = 0.0
        self._last_joints: dict[str, np.ndarray] = {}
        self._roadster = False
        self.turns = 0

    # ---- records -------------------------------------------------------------------------------

    def record(self, rec: dict[str, Any]) -> None:
        """One line of the episode log."""
        kind = rec.get("kind")
        if kind == "header":
            self._header(rec)
        elif kind == "turn":
            self._turn(rec)
        elif kind == "shadow":
            self._shadow(rec)
        elif kind in ("end", "aborted", "error"):
            self._event(f"{kind}: {rec.get('detail') or rec.get('error') or ''}", "ERROR")

    def close(self, summary: dict[str, Any] | None = None) -> None:
        """The episode's verdict as the last event; flush the file."""
        if summary is not None:
            verdict = "success" if summary.get("success") else "failure"
            self._event(
                f"{verdict}: {summary.get('end_reason', '')} after {summary.get('turns', 0)} turns "
                f"({summary.get('detail', '')})",
                "INFO" if summary.get("success") else "WARN",
            )
        self.rec.flush()
        if self.web_url is None:  # a served recording stays up until the process ends
            self.rec.disconnect()

    # ---- header --------------------------------------------------------------------------------

    def _header(self, h: dict[str, Any]) -> None:
        rr, rec = self.rr, self.rec
        rec.log("episode/instruction", rr.TextDocument(str(h.get("instruction", ""))), static=True)
        info = {k: h.get(k) for k in ("task", "robot", "seed", "policy", "mode") if k in h}
        rec.log("episode/info", rr.TextDocument(json.dumps(info, indent=1)), static=True)
        rec.log("world", rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
        if "scenario" in h:  # the roadster
            self._roadster = True
            self._scene_roadster(h["scenario"])
            return
        if self._kin is None and h.get("robot"):
            self._kin = _kinematics_for(str(h["robot"]))
        if self._kin is not None:
            try:
                self._poser = LinkPoser(self._kin)
                self._parts_joints = {n: list(p.joints) for n, p in self._kin.robot.parts.items()}
            except Exception as exc:  # a model the poser cannot read: tool points only
                log.warning("view: no link frames: %s", exc)
                self._poser = None

    def _scene_roadster(self, sc: dict[str, Any]) -> None:
        rr, rec = self.rr, self.rec
        rec.log(
            "world/road",
            rr.Boxes3D(centers=[[300.0, 0.0, -0.05]], half_sizes=[[400.0, 4.0, 0.05]], colors=[[90, 90, 90]]),
            static=True,
        )
        if sc.get("stunt") == "kickflip" and sc.get("truck_x_m"):
            x = float(sc["truck_x_m"])
            rec.log(
                "world/truck",
                rr.Boxes3D(
                    centers=[[x + 6.0, 0.0, 1.8]], half_sizes=[[6.0, 1.3, 1.8]], colors=[[200, 60, 60]]
                ),
                static=True,
            )
        elif sc.get("stunt") == "ramp_flip":
            hgt = float(sc.get("exit_height_m", 0.0)) or 1.0
            rec.log(
                "world/ramp",
                rr.LineStrips3D(
                    [[[-12.0, 0.0, 0.0], [0.0, 0.0, hgt], [0.0, 0.0, 0.0]]], colors=[[220, 160, 40]]
                ),
                static=True,
            )

    # ---- turns ---------------------------------------------------------------------------------

    def _at(self, turn: int, t_s: float) -> None:
        self.rec.set_time("turn", sequence=turn)
        self.rec.set_time("sim_time", duration=max(0.0, float(t_s)))

    def _event(self, text: str, level: str = "INFO") -> None:
        self.rec.log("events", self.rr.TextLog(text, level=level))

    def _turn(self, r: dict[str, Any]) -> None:
        rr, rec = self.rr, self.rec
        turn = int(r.get("turn", self.turns + 1))
        self.turns = max(self.turns, turn)
        t_obs = self._last_t_s
        self._at(turn, t_obs)
        for cam, rel in (r.get("images") or {}).items():
            path = self.run_dir / rel
            if path.is_file():
                rec.log(
                    f"cameras/{cam}", rr.EncodedImage(contents=path.read_bytes(), media_type="image/jpeg")
                )
        rec.log("model/prompt", rr.TextDocument(str(r.get("prompt", ""))))
        for part, st in (r.get("state") or {}).items():
            if isinstance(st, dict) and "position" in st:
                p = np.asarray(st["position"], dtype=float) / 100.0
                rec.log(f"world/{part}/tool", rr.Points3D([p], radii=0.012, colors=[[40, 200, 80]]))
                if st.get("gripper") is not None:
                    rec.log(f"state/{part}/gripper", rr.Scalars(float(st["gripper"])))
        joints = r.get("joints_rad") or {}
        if joints:
            self._joints(joints, t_obs)
        if "telemetry" in r:
            self._telemetry(r["telemetry"], r.get("prompt", ""))
        # the decision: in realtime the world moved on while the policy thought
        t_dec = t_obs + float(r.get("advanced_s") or 0.0)
        self._at(turn, t_dec)
        if r.get("reply") is not None:
            rec.log("model/reply", rr.TextDocument(str(r["reply"])))
        if r.get("latency_s") is not None:
            rec.log("decision/latency_s", rr.Scalars(float(r["latency_s"])))
        if r.get("action") is not None:
            rec.log(
                "model/action",
                rr.TextDocument(
                    f"```json\n{json.dumps(r['action'], indent=1)}\n```", media_type="text/markdown"
                ),
            )
        ik = ((r.get("plan") or {}).get("ik")) or {}
        for part, info in ik.items():
            tgt = info.get("target_position_cm")
            if tgt is None:
                continue
            tgt_m = np.asarray(tgt, dtype=float) / 100.0
            rec.log(f"world/{part}/target", rr.Points3D([tgt_m], radii=0.015, colors=[[230, 60, 60]]))
            st = (r.get("state") or {}).get(part) or {}
            if "position" in st:
                cur = np.asarray(st["position"], dtype=float) / 100.0
                rec.log(f"world/{part}/command", rr.Arrows3D(origins=[cur], vectors=[tgt_m - cur]))
        if r.get("error"):
            self._event(f"turn {turn}: invalid reply: {r['error']}", "WARN")
        outcome = r.get("outcome") or {}
        for note in outcome.get("notes") or []:
            self._event(f"turn {turn}: clipped: {note}", "WARN")
        status = outcome.get("status")
        if status in ("refused", "ik_failed", "stopped", "blocked"):
            self._event(f"turn {turn}: {status}: {outcome.get('detail', '')}", "WARN")
        t_end = float(r.get("sim_time_s", t_dec) or t_dec)
        for row in r.get("rows") or []:  # the roadster's telemetry while the command flew
            self._at(turn, float(row.get("t_s", t_end)))
            self._aircraft(row)
        self._at(turn, t_end)
        if status is not None:
            rec.log("outcome/status", rr.TextLog(f"{status}: {outcome.get('detail', '')}"))
        if r.get("end"):
            self._event(f"turn {turn}: episode ends: {r['end']}", "INFO")
        self._last_t_s = t_end

    def _shadow(self, r: dict[str, Any]) -> None:
        """A real robot's action run by its simulated twin instead (arm_mode shadow): the twin's
        arm where the action left it (`world/twin`, beside the real arm, which did not move), its
        outcome, and what would have been sent to each controller."""
        rr, rec = self.rr, self.rec
        self._at(self.turns + 1, self._last_t_s)
        twin = r.get("twin") or {}
        joints = twin.get("joints_rad") or {}
        if self._poser is not None and joints:
            pos, _ = self._poser.poses(joints)
            blue = [[90, 160, 255]]
            rec.log("world/twin/links", rr.Points3D(pos, radii=0.008, colors=blue))
            segs = [[pos[p], pos[i]] for i, p in enumerate(self._poser.parent) if p >= 0]
            if segs:
                rec.log("world/twin/skeleton", rr.LineStrips3D(segs, colors=blue))
        rec.log("twin/outcome", rr.TextLog(f"{twin.get('status')}: {twin.get('detail') or ''}"))
        for topic, sent in (r.get("would_send") or {}).items():
            rec.log(f"would_send{topic}/duration_s", rr.Scalars(float(sent["duration_s"])))
            rec.log(f"would_send{topic}/peak_speed_rad_s", rr.Scalars(float(sent["peak_speed_rad_s"])))

    def _joints(self, joints: dict[str, list[float]], t_s: float) -> None:
        rr, rec = self.rr, self.rec
        for part, values in joints.items():
            q = np.asarray(values, dtype=float)
            names = self._parts_joints.get(part) or [f"j{i + 1}" for i in range(len(q))]
            prev = self._last_joints.get(part)
            dt = t_s - getattr(self, "_last_joint_t_s", 0.0)
            for i, name in enumerate(names[: len(q)]):
                rec.log(f"joints/{part}/{name}/position_rad", rr.Scalars(float(q[i])))
                if prev is not None and dt > 1e-9:
                    rec.log(f"joints/{part}/{name}/velocity_rad_s", rr.Scalars(float((q[i] - prev[i]) / dt)))
            self._last_joints[part] = q
        self._last_joint_t_s = t_s
        if self._poser is None:
            return
        pos, rot = self._poser.poses(joints)
        rec.log("world/robot/links", rr.Points3D(pos, radii=0.008, labels=self._poser.names))
        segs = [[pos[p], pos[i]] for i, p in enumerate(self._poser.parent) if p >= 0]
        if segs:
            rec.log("world/robot/skeleton", rr.LineStrips3D(segs, colors=[[180, 180, 200]]))
        axis_m = 0.05
        origins = np.repeat(pos, 3, axis=0)
        vectors = np.concatenate([rot[:, :, k] * axis_m for k in range(3)], axis=1).reshape(-1, 3)
        colors = np.tile(np.array([[255, 0, 0], [0, 200, 0], [0, 80, 255]], dtype=np.uint8), (len(pos), 1))
        rec.log("world/robot/axes", rr.Arrows3D(origins=origins, vectors=vectors, colors=colors))

    def _telemetry(self, row: dict[str, Any], prompt: str) -> None:
        rr, rec = self.rr, self.rec
        line = next((ln for ln in str(prompt).splitlines() if "=" in ln), "")
        rec.log("telemetry/row", rr.TextDocument(line or json.dumps(row)))
        self._aircraft(row)

    def _aircraft(self, row: dict[str, Any]) -> None:
        rr, rec = self.rr, self.rec
        for k, v in row.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                rec.log(f"telemetry/{k}", rr.Scalars(float(v)))
        if not all(k in row for k in ("x_m", "y_m", "h_m")):
            return
        rot = _rpy_matrix(
            math.radians(float(row.get("roll_deg", 0.0))),
            math.radians(float(row.get("pitch_deg", 0.0))),
            math.radians(float(row.get("yaw_deg", 0.0))),
        )
        rec.log(
            "world/aircraft",
            rr.Transform3D(translation=[float(row["x_m"]), float(row["y_m"]), float(row["h_m"])], mat3x3=rot),
        )
        rec.log("world/aircraft/body", rr.Boxes3D(half_sizes=[[2.2, 0.9, 0.7]], colors=[[60, 120, 230]]))


def view_run(
    run_dir: Path, *, rrd_path: Path | None = None, spawn: bool = False, web_port: int | None = None
) -> Path:
    """A finished run's `episode.jsonl` (and its images) into a `.rrd` beside it."""
    run_dir = Path(run_dir)
    log_path = run_dir / "episode.jsonl" if run_dir.is_dir() else run_dir
    if not log_path.is_file():
        raise FileNotFoundError(f"no episode log at {log_path} (give a run folder with episode.jsonl)")
    run_dir = log_path.parent
    view = EpisodeView(rrd_path or run_dir / RRD_NAME, run_dir=run_dir, spawn=spawn, web_port=web_port)
    summary = None
    for rec in read_log(log_path):
        view.record(rec)
    summary_path = run_dir / "summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    view.close(summary)
    return view.rrd_path
