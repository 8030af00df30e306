"""Training programs: what a program learns, and the loop that teaches it (Keras-shaped).

A program learns the instructions and the worked examples (demos) each of its
language-model calls is shown, never weights: every ``Generator`` and
``KnowledgeRetriever`` holds a :class:`Variable`. ``Program`` inherits
:class:`Trainer`: ``compile(reward=, optimizer=, metrics=)``, ``await fit(x, y)``,
``await evaluate(x, y)``, ``await predict(x)``, ``save_variables`` /
``load_variables``. Rewards, optimizers and callbacks live in their own modules.
"""

from kag.training.callbacks import (
    Callback,
    CallbackList,
    CSVLogger,
    EarlyStopping,
    LambdaCallback,
    ProgramCheckpoint,
    ProgressBar,
)
from kag.training.history import History
from kag.training.optimizers import (
    BootstrapFewShot,
    InstructionOptimizer,
    KNNFewShot,
    Optimizer,
    Outcome,
    RandomFewShot,
)
from kag.training.plots import ProgramPicture, plot_history, plot_program
from kag.training.rewards import AnswerSetF1, CosineSimilarity, ExactMatch, FunctionReward, LMAsJudge, Reward
from kag.training.trainer import Trainer, TrainerSync
from kag.training.variables import Demo, Variable

__all__ = [
    "AnswerSetF1",
    "BootstrapFewShot",
    "CSVLogger",
    "Callback",
    "CallbackList",
    "CosineSimilarity",
    "Demo",
    "EarlyStopping",
    "ExactMatch",
    "FunctionReward",
    "History",
    "InstructionOptimizer",
    "KNNFewShot",
    "LMAsJudge",
    "LambdaCallback",
    "Optimizer",
    "Outcome",
    "ProgramCheckpoint",
    "ProgramPicture",
    "ProgressBar",
    "RandomFewShot",
    "Reward",
    "Trainer",
    "TrainerSync",
    "Variable",
    "plot_history",
    "plot_program",
]
