"""What a snippet may name: the torch functions, tensor methods and attributes, math names and builtins.

Snippets come from strangers, so nothing is reached by name unless it is listed here. Every name below is a
pure tensor operation (or a documented autograd entry point); nothing here touches files, processes,
the network, storage pointers or Python internals. Names starting with an underscore are never reached.
"""

from __future__ import annotations

# elementwise, reductions, linear algebra, shapes: callable as torch.NAME(...) and, where torch has it,
# as the tensor method x.NAME(...)
_MATH = """
abs absolute acos acosh add addcdiv addcmul addmm addmv addr amax amin angle arccos arccosh arcsin arcsinh
arctan arctan2 arctanh argmax argmin argsort argwhere asin asinh atan atan2 atanh baddbmm bmm broadcast_tensors
broadcast_to bucketize cat ceil chunk clamp clamp_max clamp_min clip concat concatenate conj cos cosh count_nonzero
cross cummax cummin cumprod cumsum deg2rad det diag diag_embed diagflat diagonal diff digamma dist div divide dot
dsplit dstack einsum eq equal erf erfc erfinv exp exp2 expm1 flatten flip fliplr flipud float_power floor
floor_divide fmax fmin fmod frac gather ge gcd greater greater_equal gt heaviside hstack hypot i0 igamma index_add
index_copy index_fill index_select inner inverse isclose isfinite isinf isnan isneginf isposinf isreal kron
kthvalue lcm ldexp le lerp less less_equal lgamma log log10 log1p log2 log_softmax logaddexp logaddexp2 logcumsumexp
logdet logical_and logical_not logical_or logical_xor logit logsumexp lt masked_fill masked_scatter masked_select
matmul matrix_exp matrix_power max maximum mean median min minimum mm mode moveaxis movedim msort mul multiply mv
mvlgamma nan_to_num nanmean nanmedian nansum narrow ne neg negative nonzero norm not_equal numel outer permute
polygamma positive pow prod rad2deg ravel reciprocal remainder renorm repeat_interleave reshape roll rot90 round
rsqrt scatter scatter_add searchsorted select sgn sigmoid sign signbit sin sinc sinh slogdet softmax sort split
sqrt square squeeze stack std std_mean sub subtract sum swapaxes swapdims t take take_along_dim tan tanh tensor_split
tensordot tile topk trace transpose trapezoid trapz tril triu true_divide trunc unbind unflatten unique
unique_consecutive unsqueeze vander var var_mean vdot view_as_real vsplit vstack where xlogy
relu selu celu rrelu hardshrink softshrink threshold cdist cosine_similarity pairwise_distance pdist
clone detach is_tensor is_floating_point is_complex numel result_type promote_types can_cast from_numpy
"""

# made from shapes or data: their sizes are checked before the call
FACTORIES = frozenset(
    """tensor as_tensor zeros ones empty full rand randn randint randperm arange linspace logspace eye
    zeros_like ones_like empty_like full_like rand_like randn_like randint_like Tensor FloatTensor DoubleTensor
    LongTensor IntTensor BoolTensor HalfTensor ByteTensor""".split()
)

TORCH_FUNCTIONS = frozenset(_MATH.split()) | FACTORIES

# torch.NAME that are values, not functions
TORCH_DTYPES = frozenset(
    """float float32 float64 double half float16 bfloat16 int int32 int64 long int16 short int8 uint8 bool
    complex64 complex128 cfloat cdouble""".split()
)
TORCH_OTHER = frozenset(
    """pi e inf nan no_grad enable_grad set_grad_enabled is_grad_enabled inference_mode manual_seed seed
    set_printoptions get_default_dtype set_default_dtype Size device Generator""".split()
)

# torch.nn.functional.NAME
FUNCTIONAL = frozenset(
    """relu relu6 elu selu celu gelu silu mish softplus softsign softmin softmax log_softmax sigmoid tanh hardtanh
    hardsigmoid hardswish leaky_relu logsigmoid tanhshrink softshrink hardshrink threshold glu prelu rrelu
    linear bilinear normalize one_hot pad dropout cosine_similarity pairwise_distance pdist
    mse_loss l1_loss smooth_l1_loss huber_loss binary_cross_entropy binary_cross_entropy_with_logits cross_entropy
    nll_loss kl_div poisson_nll_loss gaussian_nll_loss hinge_embedding_loss margin_ranking_loss soft_margin_loss
    multilabel_soft_margin_loss cosine_embedding_loss triplet_margin_loss conv1d conv2d max_pool1d max_pool2d
    avg_pool1d avg_pool2d layer_norm batch_norm embedding""".split()
)

LINALG = frozenset(
    """norm vector_norm matrix_norm det slogdet inv pinv solve cholesky qr eigh eigvalsh svd svdvals cross
    matmul multi_dot matrix_power matrix_rank vecdot diagonal""".split()
)
SPECIAL = frozenset(
    """erf erfc erfinv expit logit exp2 expm1 log1p log_softmax softmax logsumexp xlogy xlog1py gammaln digamma
    psi i0 sinc entr ndtr ndtri log_ndtr round""".split()
)

# torch.autograd.NAME and torch.autograd.functional.NAME: the calls a snippet explains as events
AUTOGRAD = frozenset({"grad", "backward", "Variable", "Function", "set_detect_anomaly", "detect_anomaly"})
AUTOGRAD_FUNCTIONAL = frozenset({"jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"})
FUNC = frozenset({"grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap"})

# nn.NAME: modules a snippet may build (their parameters are real leaves)
NN_MODULES = frozenset(
    """Linear Bilinear ReLU Sigmoid Tanh Softmax LogSoftmax GELU SiLU ELU LeakyReLU Softplus Identity Flatten
    Sequential MSELoss L1Loss BCELoss BCEWithLogitsLoss CrossEntropyLoss NLLLoss SmoothL1Loss HuberLoss Parameter
    Module Dropout ModuleList ModuleDict LayerNorm BatchNorm1d MaxPool1d MaxPool2d AvgPool1d AvgPool2d Hardtanh
    Mish SELU PReLU ReLU6 Softsign Tanhshrink LogSigmoid KLDivLoss GaussianNLLLoss CosineSimilarity""".split()
)
OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad"})

# x.NAME(...) on a tensor, beyond the torch functions above that torch also has as methods
TENSOR_METHODS = (
    frozenset(
        """backward register_hook retain_grad requires_grad_ detach detach_ zero_ item tolist size dim ndimension
        nelement element_size view view_as reshape_as expand expand_as contiguous float double half int long bool
        to type type_as cpu new_tensor new_zeros new_ones new_full new_empty fill_ add_ sub_ mul_ div_ pow_ neg_
        abs_ exp_ log_ sqrt_ clamp_ clamp_min_ clamp_max_ copy_ normal_ uniform_ random_ index_fill_ index_add_
        masked_fill_ scatter_ scatter_add_ unsqueeze_ squeeze_ t_ transpose_ relu_ sigmoid_ tanh_ sin_ cos_
        floor_ ceil_ round_ sign_ reciprocal_ addcmul_ addcdiv_ lerp_ fmod_ remainder_ square_ sub mul add div
        is_contiguous all any tril_ triu_ fill_diagonal_ exponential_ bernoulli_ bernoulli multinomial repeat
        masked_fill index_put index_put_ sum_to_size numpy""".split()
    )
    | TORCH_FUNCTIONS
) - FACTORIES

# x.NAME on a tensor that reads a value (no call)
TENSOR_ATTRS = frozenset(
    """grad data shape dtype requires_grad is_leaf grad_fn T mT H mH ndim device is_cuda layout names real imag
    retains_grad output_nr _version""".split()
) - {"_version"}
TENSOR_SETTABLE = frozenset({"grad", "requires_grad", "data"})

# math.NAME
MATH = frozenset(
    """pi e tau inf nan sqrt exp log log2 log10 log1p expm1 sin cos tan asin acos atan atan2 sinh cosh tanh asinh
    acosh atanh floor ceil trunc fabs pow hypot erf erfc gamma lgamma isfinite isinf isnan isclose fsum prod
    degrees radians copysign fmod factorial comb perm gcd exp2 cbrt dist""".split()
)

# Python builtins a snippet may call
BUILTINS = frozenset(
    """print len range abs min max sum float int bool str list tuple dict set enumerate zip round repr format sorted
    reversed any all isinstance type divmod pow map filter iter next hasattr""".split()
) - {"iter", "next", "hasattr"}

EXCEPTIONS = frozenset(
    """Exception RuntimeError ValueError TypeError IndexError KeyError ZeroDivisionError AssertionError
    ArithmeticError LookupError NotImplementedError StopIteration""".split()
)

# methods of plain Python values
LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "index", "count", "reverse", "sort", "copy", "clear"})
DICT_METHODS = frozenset({"items", "keys", "values", "get", "update", "pop", "copy", "setdefault"})
STR_METHODS = frozenset(
    """format join split strip lstrip rstrip upper lower replace startswith endswith ljust rjust center title
    zfill splitlines""".split()
)

# numpy.NAME: what autograd snippets do with numpy (make inputs, convert, compare, print): array arithmetic
# only; no file, buffer, memory-map or Python-object function (load, save, fromfile, frombuffer, ...)
NUMPY = frozenset(
    """array asarray zeros ones empty full arange linspace eye identity zeros_like ones_like full_like exp log log2
    log10 log1p expm1 sqrt square abs absolute sin cos tan tanh sinh cosh arcsin arccos arctan arctan2 sign maximum
    minimum clip sum mean prod max min amax amin argmax argmin std var dot matmul outer inner transpose reshape
    concatenate stack hstack vstack where allclose isclose array_equal round around floor ceil power sort argsort
    cumsum cumprod diag trace isnan isinf isfinite all any squeeze expand_dims swapaxes add subtract multiply divide
    negative reciprocal einsum repeat tile""".split()
)
NUMPY_VALUES = frozenset(
    """pi e inf nan newaxis float32 float64 float16 int32 int64 int8 uint8 bool_ ndarray""".split()
)
# the numpy scalar types a snippet may call, np.float32(1.5), as their __name__ (np.bool_ is "bool")
NUMPY_SCALARS = frozenset({"float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"})
NUMPY_RANDOM = frozenset({"seed", "rand", "randn", "normal", "uniform", "randint", "random"})
# a.NAME on a numpy array (and a.NAME(...))
NDARRAY_ATTRS = frozenset({"shape", "ndim", "size", "dtype", "T"})
NDARRAY_METHODS = frozenset(
    """sum mean prod max min argmax argmin std var reshape transpose flatten ravel astype tolist item copy dot
    squeeze round clip cumsum all any repeat""".split()
)

# `import X` / `from X import Y` that a snippet may write (anything else is refused by name)
IMPORTABLE_MODULES = frozenset(
    {
        "numpy",
        "numpy.random",
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "torch.autograd",
        "torch.autograd.functional",
        "torch.func",
        "torch.linalg",
        "torch.special",
        "torch.optim",
        "math",
    }
)
