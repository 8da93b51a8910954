"""The Itanium demangler: golden symbols, real nvcc symbols checked against c++filt, and garbage input."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelpack.core.errors import KernelpackError
from kernelpack.frontends.cuda.demangle import (
    ArrayOf,
    Builtin,
    Demangled,
    DemangleError,
    Entity,
    FunctionType,
    Literal,
    Named,
    PointerTo,
    Qualified,
    ReferenceTo,
    demangle,
    is_mangled,
    spell,
)
from toolchain_support import NVCC

FLOAT, INT, VOID = Builtin("float"), Builtin("int"), Builtin("void")

# --- comparing with c++filt ------------------------------------------------------------------------------------------

_TRAILING_QUALIFIERS = re.compile(r"(?: (?:const|volatile|__restrict__))+")


def _west_const(text: str) -> str:
    """c++filt writes ``float const*``, spell() ``const float*``: move qualifiers that follow a type name before it."""
    pos = 0
    while m := _TRAILING_QUALIFIERS.search(text, pos):
        pos = m.end()
        if text[m.start() - 1] in "*&":  # they qualify a pointer or reference: they stay
            continue
        start, depth = m.start(), 0
        while start > 0:  # back to the start of the type: an unmatched "(" or "<", a "," at depth 0
            ch = text[start - 1]
            if ch in "<(" and depth == 0 or ch == "," and depth == 0:
                break
            depth += 1 if ch in ">)" else -1 if ch in "<(" else 0
            start -= 1
        while text[start] == " ":
            start += 1
        text = f"{text[:start]}{m.group().strip()} {text[start : m.start()]}{text[m.end() :]}"
    return text


def _normalize(text: str) -> str:
    """Whitespace only where it separates words: ``int (*) [4]`` and ``int (*)[4]`` compare equal."""
    return re.sub(r" ?([^\w ]) ?", r"\1", re.sub(r"\s+", " ", text.strip()))


def _from_cxxfilt(text: str) -> str:
    """c++filt's spelling of a kernel, in spell()'s conventions, normalized."""
    text = re.sub(r" \[clone [^]]*\]$", "", text)
    text = text.replace("decltype(nullptr)", "std::nullptr_t").replace("std::bfloat16_t", "__bf16")
    text = re.sub(r"\brestrict\b", "__restrict__", text)
    if "<" in text.split("(", 1)[0]:
        text = text.removeprefix("void ")  # template functions mangle their return type; kernels return void
    return _normalize(_west_const(text).replace("<>(", "("))  # an empty pack: Demangled has no template args


def _agrees(symbol: str, cxxfilt: str) -> bool:
    return _normalize(str(demangle(symbol))) == _from_cxxfilt(cxxfilt)


def test_the_cxxfilt_normalizer() -> None:
    assert (
        _west_const("f(float const*, ns::A<int, 4> const volatile*)")
        == "f(const float*, const volatile ns::A<int, 4>*)"
    )
    assert _west_const("f(float const* const*, unsigned int const)") == "f(const float* const*, const unsigned int)"
    assert _west_const("f((anonymous namespace)::A const&)") == "f(const (anonymous namespace)::A&)"
    assert _normalize("f(int (*) [4], std::A<int, B<c> >)") == "f(int(*)[4],std::A<int,B<c>>)"


# (symbol, c++filt's output): from nvcc 13.0 for sm_90a, and written by hand for the substitution rules
GOLDEN = [
    ("_Z6axpy_kfPKfPfi", "axpy_k(float, float const*, float*, int)"),
    ("_Z9nothing_kv", "nothing_k()"),
    ("_Z10__kp_probeILi0EFvPKfPfiEEvv", "void __kp_probe<0, void (float const*, float*, int)>()"),
    ("_Z10__kp_probeILi2EFvvEEvv", "void __kp_probe<2, void ()>()"),
    (
        "_Z10__kp_probeILi1EFv14CUtensorMap_stP6__halfN2ns4ArgsEEEvv",
        "void __kp_probe<1, void (CUtensorMap_st, __half*, ns::Args)>()",
    ),
    ("_ZN36_GLOBAL__N__932ef5e0_4_k_cu_8b4ec3d56anon_kEPi", "(anonymous namespace)::anon_k(int*)"),
    ("_Z5tma_k14CUtensorMap_stPPfPKPKf", "tma_k(CUtensorMap_st, float**, float const* const*)"),
    (
        "_Z6half_kP6__halfPK13__nv_bfloat167__half214__nv_bfloat162S_",
        "half_k(__half*, __nv_bfloat16 const*, __half2, __nv_bfloat162, __half)",
    ),
    ("_Z10restrict_kPKfPrPfPrKPKi", "restrict_k(float const*, float* restrict*, int const* const restrict*)"),
    (
        "_Z6ints_kcahstlmxybdamw",
        "ints_k(char, signed char, unsigned char, short, unsigned short, long, unsigned long, long long, "
        "unsigned long long, bool, double, signed char, unsigned long, wchar_t)",
    ),
    (
        "_Z10volatile_kPViPVKjPKPVf",
        "volatile_k(int volatile*, unsigned int const volatile*, float volatile* const*)",
    ),
    ("_Z7fnptr_kPFviEPA4_iPFfPKfPfE", "fnptr_k(void (*)(int), int (*) [4], float (*)(float const*, float*))"),
    ("_Z2tkIfLi4EEvPKT_PS0_S0_", "void tk<float, 4>(float const*, float*, float)"),
    ("_Z2tkI6__halfLin3EEvPKT_PS1_S1_", "void tk<__half, -3>(__half const*, __half*, __half)"),
    (
        "_ZN2ns4gemmI13__nv_bfloat16EEvPKT_S4_PS2_NS_4ArgsENS_5inner3VecIS2_Li4EEE",
        "void ns::gemm<__nv_bfloat16>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, ns::Args, "
        "ns::inner::Vec<__nv_bfloat16, 4>)",
    ),
    (
        "_ZN2ns6detail3cvtIf6__halfEEvPKT_PT0_NS_4WrapIS3_EENS8_IS6_EE",
        "void ns::detail::cvt<float, __half>(float const*, __half*, ns::Wrap<float>, ns::Wrap<__half>)",
    ),
    ("_Z2vkIJifPKiEEvDpT_", "void vk<int, float, int const*>(int, float, int const*)"),
    ("_Z2vkIJEEvDpT_", "void vk<>()"),
    ("_Z6vptr_kIJf6__halfEEvDpPKT_", "void vptr_k<float, __half>(float const*, __half const*)"),
    ("_Z2lkILj16ELb1ELln5ELy7ELc97EEvv", "void lk<16u, true, -5l, 7ull, (char)97>()"),
    ("_Z6enum_kILN2ns4ModeE2ELsn2ELh200EEvi", "void enum_k<(ns::Mode)2, (short)-2, (unsigned char)200>(int)"),
    ("_Z10typeonly_kIKPVKiEvi", "void typeonly_k<int const volatile* const>(int)"),
    ("_Z10typeonly_kIN2ns4WrapINS1_IiEEEEEvi", "void typeonly_k<ns::Wrap<ns::Wrap<int> > >(int)"),
    ("_Z10typeonly_kIDnEvi", "void typeonly_k<decltype(nullptr)>(int)"),
    ("_Z10typeonly_kIPFfiEEvi", "void typeonly_k<float (*)(int)>(int)"),
    ("_Z10typeonly_kIA16_iEvi", "void typeonly_k<int [16]>(int)"),
    ("_Z10typeonly_kIOKiEvi", "void typeonly_k<int const&&>(int)"),
    ("_Z10typeonly_kIRfEvi", "void typeonly_k<float&>(int)"),
    (
        "_Z5ptr_kIN2ns5inner3VecI6__halfLi8EEEEvPT_PS6_PKS5_PKS6_NS0_4WrapIS5_EENSC_IS6_EE",
        "void ptr_k<ns::inner::Vec<__half, 8> >(ns::inner::Vec<__half, 8>*, ns::inner::Vec<__half, 8>**, "
        "ns::inner::Vec<__half, 8> const*, ns::inner::Vec<__half, 8>* const*, ns::Wrap<ns::inner::Vec<__half, 8> >, "
        "ns::Wrap<ns::inner::Vec<__half, 8>*>)",
    ),
    (
        "_Z6pair_kIN2ns4ArgsEN4cute6TensorIfLi2EEEEvT_T0_PS5_PS6_NS0_4WrapIS5_EENS9_IS6_EE",
        "void pair_k<ns::Args, cute::Tensor<float, 2> >(ns::Args, cute::Tensor<float, 2>, ns::Args*, "
        "cute::Tensor<float, 2>*, ns::Wrap<ns::Args>, ns::Wrap<cute::Tensor<float, 2> >)",
    ),
    (
        "_Z7tuple_kIfEvN4cute5tupleIJT_NS0_1CILi1EEENS1_IJS2_NS3_ILi2EEEEEEEEEPS2_",
        "void tuple_k<float>(cute::tuple<float, cute::C<1>, cute::tuple<float, cute::C<2> > >, float*)",
    ),
    (
        "_Z5arr_kIiLi8EEvPN2ns5inner3VecIT_XT0_EEEPAT0__S3_",
        "void arr_k<int, 8>(ns::inner::Vec<int, 8>*, int (*) [8])",
    ),
    (
        "_Z7subst_kN2ns4ArgsEPS0_PKS0_PKS3_PNS_4WrapIS0_EENS6_IS7_EEPNS_5inner3VecIS0_Li2EEE",
        "subst_k(ns::Args, ns::Args*, ns::Args const*, ns::Args const* const*, ns::Wrap<ns::Args>*, "
        "ns::Wrap<ns::Wrap<ns::Args> >, ns::inner::Vec<ns::Args, 2>*)",
    ),
    (
        "_Z6many_kPN2ns2T0EPNS_2T1EPNS_2T2EPNS_2T3EPNS_2T4EPNS_2T5EPNS_2T6EPNS_2T7EPNS_2T8EPNS_2T9EPNS_3T10EPNS_3T11E"
        "PNS_3T12EPNS_3T13EPNS_3T14EPNS_3T15EPNS_3T16EPNS_3T17EPNS_3T18ES1_S11_PKSY_SI_",
        "many_k(ns::T0*, ns::T1*, ns::T2*, ns::T3*, ns::T4*, ns::T5*, ns::T6*, ns::T7*, ns::T8*, ns::T9*, ns::T10*, "
        "ns::T11*, ns::T12*, ns::T13*, ns::T14*, ns::T15*, ns::T16*, ns::T17*, ns::T18*, ns::T0*, ns::T18*, "
        "ns::T17 const*, ns::T9)",
    ),
    # CUB 3.0 kernels from nvcc 13.0 (cub::DeviceReduce, DeviceScan, DeviceRadixSort, thrust::transform of a lambda)
    (
        "_ZN3cub17CUB_300001_SM_9006detail9transform16transform_kernelINS2_10policy_hubILb1EN4cuda3std3__45tupleI"
        "JN6thrust23THRUST_300001_SM_900_NS6detail15normal_iteratorINSA_10device_ptrIfEEEEEEEE10policy1000ElZ3run"
        "PfSJ_iPvmEUlfE_SF_JSJ_EEEvT0_iT1_T2_DpNS2_10kernel_argIT3_EE",
        "void cub::CUB_300001_SM_900::detail::transform::transform_kernel<cub::CUB_300001_SM_900::detail::transfo"
        "rm::policy_hub<true, cuda::std::__4::tuple<thrust::THRUST_300001_SM_900_NS::detail::normal_iterator<thru"
        "st::THRUST_300001_SM_900_NS::device_ptr<float> > > >::policy1000, long, run(float*, float*, int, void*, "
        "unsigned long)::{lambda(float)#1}, thrust::THRUST_300001_SM_900_NS::detail::normal_iterator<thrust::THRU"
        "ST_300001_SM_900_NS::device_ptr<float> >, float*>(long, int, run(float*, float*, int, void*, unsigned lo"
        "ng)::{lambda(float)#1}, thrust::THRUST_300001_SM_900_NS::detail::normal_iterator<thrust::THRUST_300001_S"
        "M_900_NS::device_ptr<float> >, cub::CUB_300001_SM_900::detail::transform::kernel_arg<float*>)",
    ),
    (
        "_ZN3cub17CUB_300001_SM_9006detail6reduce18DeviceReduceKernelINS2_10policy_hubIfyN4cuda3__47maximumIfEEE1"
        "0Policy1000EN6thrust23THRUST_300001_SM_900_NS6detail15normal_iteratorINSC_10device_ptrIfEEEEyS8_fNS5_3st"
        "d3__410__identityEEEvT0_PT3_T1_NS0_13GridEvenShareISO_EET2_T4_",
        "void cub::CUB_300001_SM_900::detail::reduce::DeviceReduceKernel<cub::CUB_300001_SM_900::detail::reduce::"
        "policy_hub<float, unsigned long long, cuda::__4::maximum<float> >::Policy1000, thrust::THRUST_300001_SM_"
        "900_NS::detail::normal_iterator<thrust::THRUST_300001_SM_900_NS::device_ptr<float> >, unsigned long long"
        ", cuda::__4::maximum<float>, float, cuda::std::__4::__identity>(thrust::THRUST_300001_SM_900_NS::detail:"
        ":normal_iterator<thrust::THRUST_300001_SM_900_NS::device_ptr<float> >, float*, unsigned long long, cub::"
        "CUB_300001_SM_900::GridEvenShare<unsigned long long>, cuda::__4::maximum<float>, cuda::std::__4::__ident"
        "ity)",
    ),
    (
        "_ZN3cub17CUB_300001_SM_9006detail10radix_sort29DeviceRadixSortOnesweepKernelINS1_5radix10policy_hubIfNS0"
        "_8NullTypeEyE10Policy1000ELNS0_9SortOrderE0EfS6_yiiNS1_21identity_decomposer_tEEEvPT5_SC_PT3_PKSD_PT1_PK"
        "SH_PT2_PKSL_T4_iiT6_",
        "void cub::CUB_300001_SM_900::detail::radix_sort::DeviceRadixSortOnesweepKernel<cub::CUB_300001_SM_900::d"
        "etail::radix::policy_hub<float, cub::CUB_300001_SM_900::NullType, unsigned long long>::Policy1000, (cub:"
        ":CUB_300001_SM_900::SortOrder)0, float, cub::CUB_300001_SM_900::NullType, unsigned long long, int, int, "
        "cub::CUB_300001_SM_900::detail::identity_decomposer_t>(int*, int*, unsigned long long*, unsigned long lo"
        "ng const*, float*, float const*, cub::CUB_300001_SM_900::NullType*, cub::CUB_300001_SM_900::NullType con"
        "st*, int, int, int, cub::CUB_300001_SM_900::detail::identity_decomposer_t)",
    ),
    (
        "_ZN3cub17CUB_300001_SM_9006detail4scan16DeviceScanKernelINS2_10policy_hubIfffjN4cuda3std3__44plusIvEEE10"
        "Policy1000EPfSC_NS0_13ScanTileStateIfLb1EEES9_NS0_8NullTypeEjfLb0ESF_EEvT0_T1_T2_iT3_T4_T5_",
        "void cub::CUB_300001_SM_900::detail::scan::DeviceScanKernel<cub::CUB_300001_SM_900::detail::scan::policy"
        "_hub<float, float, float, unsigned int, cuda::std::__4::plus<void> >::Policy1000, float*, float*, cub::C"
        "UB_300001_SM_900::ScanTileState<float, true>, cuda::std::__4::plus<void>, cub::CUB_300001_SM_900::NullTy"
        "pe, unsigned int, float, false, cub::CUB_300001_SM_900::NullType>(float*, float*, cub::CUB_300001_SM_900"
        "::ScanTileState<float, true>, int, cuda::std::__4::plus<void>, cub::CUB_300001_SM_900::NullType, unsigne"
        "d int)",
    ),
    # substitution rules, each checked against c++filt
    ("_Z1fN1a1bIiE1cES1_", "f(a::b<int>::c, a::b<int>)"),  # prefixes and template prefixes
    ("_ZN2ns1fIiEEvNS_1AIT_EES3_", "void ns::f<int>(ns::A<int>, ns::A<int>)"),
    ("_Z1fIiEvNT_3fooES0_", "void f<int>(int::foo, int)"),  # a template parameter as a prefix
    ("_Z1fIiEvNT_3fooES1_", "void f<int>(int::foo, int::foo)"),
    ("_Z1fIN2ns1AEEvNT_4typeE", "void f<ns::A>(ns::A::type)"),
    ("_Z1fIiEvT_IfES1_", "void f<int>(int<float>, int<float>)"),  # template template parameter
    ("_Z1fIiEvT_IfES_", "void f<int>(int<float>, f)"),  # the unscoped template name
    ("_Z1fPFivES_S0_", "f(int (*)(), int (), int (*)())"),  # function types
    ("_Z1fPrVKiS_S0_", "f(int const volatile restrict*, int const volatile restrict, int const volatile restrict*)"),
    ("_Z1fPKPVKPKc", "f(char const* const volatile* const*)"),
    ("_Z1fRA3_iS_S0_", "f(int (&) [3], int [3], int (&) [3])"),  # arrays
    ("_Z1fPA_i", "f(int (*) [])"),
    ("_Z1fIA4_iEvPT_", "void f<int [4]>(int (*) [4])"),
    ("_Z1fSaIcES_", "f(std::allocator<char>, std::allocator<char>)"),  # std abbreviations are not entries
    ("_Z1fNSaIcE3fooES0_", "f(std::allocator<char>::foo, std::allocator<char>::foo)"),
    ("_Z1fNSt3foo3barES_", "f(std::foo::bar, std::foo)"),
    ("_Z1fSt3fooS_", "f(std::foo, std::foo)"),
    ("_Z1fSbIwE", "f(std::basic_string<wchar_t>)"),
    ("_Z1fIJifEEvDpPT_DpS1_", "void f<int, float>(int*, float*, int*, float*)"),  # packs
    ("_Z1fIJifEEvDpPT_S2_", "void f<int, float>(int*, float*, int*, float*)"),
    ("_Z1fIJifEEvDpPT_DpS0_", "void f<int, float>(int*, float*, int, float)"),
    ("_Z1fIJifEEvSt5tupleIJDpT_EE", "void f<int, float>(std::tuple<int, float>)"),
    ("_Z1fIJifEEvDpSt6vectorIT_E", "void f<int, float>(std::vector<int>, std::vector<float>)"),
    ("_Z1fIJEEvv", "void f<>()"),
    ("_Z1fu3fooS_", "f(foo, foo)"),  # a vendor type is an entry
    ("_Z1fIZ4mainE3FooEvT_S_", "void f<main::Foo>(main::Foo, f)"),  # local names
    ("_Z1fIZ1giE3FooEvT_", "void f<g(int)::Foo>(g(int)::Foo)"),
    ("_Z1fIZ4mainEUliE_EvT_", "void f<main::{lambda(int)#1}>(main::{lambda(int)#1})"),
    ("_Z1fN1aUt0_E", "f(a::{unnamed type#2})"),
    ("_Z3fooB5cxx11v", "foo[abi:cxx11]()"),
    ("_ZN12_GLOBAL__N_11fEv", "(anonymous namespace)::f()"),
    ("_ZL3foov", "foo()"),
    ("_Z2tkIKfLi4EEvPKT_PS1_S1_", "void tk<float const, 4>(float const*, float const*, float const)"),  # cv merging
    ("_Z1fIRiEvOT_", "void f<int&>(int&)"),  # reference collapsing
    ("_Z1fOi", "f(int&&)"),
    ("_Z1fILb0ELb1EEvv", "void f<false, true>()"),
    (
        "_Z1fDnDF16_DF16bDuDsDiegnoz",
        "f(decltype(nullptr), _Float16, std::bfloat16_t, char8_t, char16_t, char32_t, long double, __float128, "
        "__int128, unsigned __int128, ...)",
    ),
    ("_Z1fIiEvNT_3fooES0_.constprop.0", "void f<int>(int::foo, int) [clone .constprop.0]"),
]


@pytest.mark.parametrize(("symbol", "cxxfilt"), GOLDEN, ids=[g[0][:48] for g in GOLDEN])
def test_golden_symbols_agree_with_cxxfilt(symbol: str, cxxfilt: str) -> None:
    assert _normalize(str(demangle(symbol))) == _from_cxxfilt(cxxfilt)


@pytest.mark.parametrize(
    ("symbol", "expected"),
    [
        ("_Z1fSs", "f(std::string)"),  # c++filt spells out basic_string<char, ...> here
        ("_Z1fSo", "f(std::ostream)"),
        ("_Z1fPDoFvvES_S0_", "f(void (*)(), void (), void (*)())"),  # noexcept is dropped: no effect on the ABI
        ("_Z1fIJEEvv", "f()"),
        ("_Z1fIVPFvvEEvv", "f<void (* volatile)()>()"),
    ],
)
def test_deliberate_differences_from_cxxfilt(symbol: str, expected: str) -> None:
    assert str(demangle(symbol)) == expected


# --- the typed tree --------------------------------------------------------------------------------------------------


def test_axpy_is_a_typed_tree() -> None:
    assert demangle("_Z6axpy_kfPKfPfi") == Demangled(
        "axpy_k", (), (FLOAT, PointerTo(Qualified(FLOAT, const=True)), PointerTo(FLOAT), INT)
    )


def test_probe_carries_the_extern_c_kernel_function_type() -> None:
    d = demangle("_Z10__kp_probeILi0EFvPKfPfiEEvv")
    assert d == Demangled(
        "__kp_probe",
        (Literal(INT, 0), FunctionType(VOID, (PointerTo(Qualified(FLOAT, const=True)), PointerTo(FLOAT), INT))),
        (),
    )


def test_nested_template_types_and_literals() -> None:
    d = demangle("_ZN2ns4gemmI13__nv_bfloat16EEvPKT_S4_PS2_NS_4ArgsENS_5inner3VecIS2_Li4EEE")
    bf16 = Named("__nv_bfloat16")
    assert d.name == "ns::gemm" and d.template_args == (bf16,)
    assert d.params[3] == Named("ns::Args")
    assert d.params[4] == Named("ns::inner::Vec", (bf16, Literal(INT, 4)))
    assert demangle("_Z2lkILj16ELb1ELln5ELy7ELc97EEvv").template_args == (
        Literal(Builtin("unsigned int"), 16),
        Literal(Builtin("bool"), 1),
        Literal(Builtin("long"), -5),
        Literal(Builtin("unsigned long long"), 7),
        Literal(Builtin("char"), 97),
    )


def test_packs_are_flattened() -> None:
    d = demangle("_Z2vkIJifPKiEEvDpT_")
    assert d.template_args == d.params == (INT, FLOAT, PointerTo(Qualified(INT, const=True)))
    assert demangle("_Z2vkIJEEvDpT_") == Demangled("vk", (), ())
    assert demangle("_Z1fISt5tupleIJifEEEvT_").params == (Named("std::tuple", (INT, FLOAT)),)


def test_substitutions_share_nodes_and_compare_equal() -> None:
    d = demangle("_Z5ptr_kIN2ns5inner3VecI6__halfLi8EEEEvPT_PS6_PKS5_PKS6_NS0_4WrapIS5_EENSC_IS6_EE")
    vec = Named("ns::inner::Vec", (Named("__half"), Literal(INT, 8)))
    assert d.params == (
        PointerTo(vec),
        PointerTo(PointerTo(vec)),
        PointerTo(Qualified(vec, const=True)),
        PointerTo(Qualified(PointerTo(vec), const=True)),
        Named("ns::Wrap", (vec,)),
        Named("ns::Wrap", (PointerTo(vec),)),
    )


def test_arrays_references_and_dependent_array_bounds() -> None:
    d = demangle("_Z5arr_kIiLi8EEvPN2ns5inner3VecIT_XT0_EEEPAT0__S3_")
    assert d.params[1] == PointerTo(ArrayOf(INT, 8))
    assert demangle("_Z1fRA3_iOi").params == (ReferenceTo(ArrayOf(INT, 3)), ReferenceTo(INT, rvalue=True))


def test_functions_as_template_arguments_and_their_substitutions() -> None:
    # FlashInfer's act_and_mul_kernel<half, silu, 8>: &silu is XadL_Z4siluRKfEE; its float const& enters the
    # substitution table, so the parameters' S5_ is T_ (__half)
    d = demangle("_ZN10flashinfer10activation18act_and_mul_kernelI6__halfXadL_Z4siluRKfEELj8EEEvPT_PKS5_i")
    half = Named("__half")
    assert d.template_args == (half, Entity("&silu"), Literal(Builtin("unsigned int"), 8))
    assert d.params == (PointerTo(half), PointerTo(Qualified(half, const=True)), INT)
    assert str(d) == "flashinfer::activation::act_and_mul_kernel<__half, &silu, 8u>(__half*, const __half*, int)"
    # without the &, and a templated function: its own template parameters bind T_ inside it only
    assert demangle("_Z1fIL_Z1gvEEvv").template_args == (Entity("g"),)
    probe = demangle("_Z10__kp_lowerILi1EXadL_ZN2ns1kILj8E6__halfEEvPT0_S4_jEEEvv")
    assert probe.template_args[1] == Entity("&ns::k<8u, __half>") and probe.params == ()


def test_clone_suffix_is_stripped() -> None:
    assert demangle("_Z6axpy_kfPKfPfi.constprop.0") == demangle("_Z6axpy_kfPKfPfi")
    assert demangle("_Z6axpy_kfPKfPfi.isra.0.cold") == demangle("_Z6axpy_kfPKfPfi")


@pytest.mark.parametrize(
    ("t", "spelling"),
    [
        (PointerTo(Qualified(FLOAT, const=True)), "const float*"),
        (Qualified(PointerTo(FLOAT), const=True), "float* const"),
        (Qualified(INT, const=True, volatile=True), "const volatile int"),
        (PointerTo(Qualified(PointerTo(Builtin("char")), restrict=True)), "char* __restrict__*"),
        (PointerTo(FunctionType(VOID, (INT,))), "void (*)(int)"),
        (Qualified(PointerTo(FunctionType(VOID, ())), const=True), "void (* const)()"),
        (FunctionType(PointerTo(FunctionType(INT, ())), (FLOAT,)), "int (*(float))()"),
        (FunctionType(VOID, ()), "void ()"),
        (PointerTo(ArrayOf(FLOAT, 3)), "float (*)[3]"),
        (ReferenceTo(ArrayOf(INT, 2)), "int (&)[2]"),
        (ArrayOf(ArrayOf(INT, 3), None), "int[][3]"),
        (ReferenceTo(INT, rvalue=True), "int&&"),
        (Named("cute::Tensor", (FLOAT, Literal(INT, 4))), "cute::Tensor<float, 4>"),
        (Named("__half"), "__half"),
        (Literal(Builtin("bool"), 1), "true"),
        (Literal(Builtin("unsigned int"), 16), "16u"),
        (Literal(Builtin("unsigned long"), 16), "16ul"),
        (Literal(INT, -5), "-5"),
        (Literal(Builtin("char"), 97), "(char)97"),
        (Literal(Named("ns::Mode"), 2), "(ns::Mode)2"),
        (Literal(Builtin("std::nullptr_t"), 0), "nullptr"),
    ],
)
def test_spell(t: object, spelling: str) -> None:
    assert spell(t) == spelling  # type: ignore[arg-type]


def test_is_mangled() -> None:
    assert is_mangled("_Z6axpy_kfPKfPfi")
    assert not is_mangled("axpy_k") and not is_mangled("_Z") and not is_mangled("")


# --- errors ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("symbol", "message"),
    [
        ("axpy_k", "not an Itanium-mangled name"),
        ("_Z3foo", "expected parameter types at position 6"),  # a variable, not a function
        ("_Z1fS0_", "refers past the 0 entries"),
        ("_Z1fT_", "template parameter 0 is not bound"),
        ("_Z1fIiEvT0_", "template parameter 1 is not bound"),
        ("_Z1fILi1EEvT_", "template parameter 0 is not a type"),
        ("_ZTV3Foo", "unsupported or missing name"),
        ("_Z1fM1AFvvE", "unsupported or missing type"),  # pointer to member
        ("_Z1fIXplLi1ELi2EEEvv", "unsupported expression"),  # 1 + 2
        ("_Z1fIiEvDTfp_E", "unsupported or missing type"),  # decltype
        ("_Z1fILf3f800000EEvv", "expected 'E' at position 8"),  # floating-point literal
        ("_Z1fIJifEEvT_", "pack or value where a type belongs"),  # a pack outside an expansion
        ("_Z1fDpi", "pack expansion without a template parameter pack"),
        ("_Z12truncated", "runs past the end"),
        ("_Z1fiX", "unsupported or missing type"),
        ("_Z1fNE", "empty nested name"),
        ("_Z1fN1a", "unsupported or missing name at position 7"),
        ("_Z1fi_", "unsupported or missing type"),
    ],
)
def test_errors_name_the_symbol_and_the_position(symbol: str, message: str) -> None:
    with pytest.raises(DemangleError, match=re.escape(message)) as info:
        demangle(symbol)
    assert repr(symbol) in str(info.value) and isinstance(info.value, KernelpackError)


def test_deep_nesting_is_refused_not_a_crash() -> None:
    with pytest.raises(DemangleError, match="deep"):
        demangle("_Z1f" + "P" * 100_000 + "i")
    with pytest.raises(DemangleError, match="deep"):
        demangle("_Z1fPi" + "".join(f"PS{_seq(i)}" for i in range(200)))  # each a pointer to the one before


def test_exponential_substitution_is_refused_quickly() -> None:
    symbol = "_Z1fFviE" + "".join(f"FvS{_seq(i)}S{_seq(i)}E" for i in range(40))
    with pytest.raises(DemangleError, match="too large"):
        demangle(symbol)


def _seq(i: int) -> str:
    """The substitution S<seq-id>_ for entry i, base 36."""
    if i == 0:
        return "_"
    digits, n = "", i - 1
    while True:
        digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"[n % 36] + digits
        n //= 36
        if not n:
            return digits + "_"


_ALPHABET = "_0123456789ZNESIJLXTDFPKVROAvifdcjmbnhlsxyzputBtCoaeg"


def _mutate(symbol: str, at: int, text: str, keep_tail: bool) -> str:
    """A real symbol truncated at ``at`` or with characters overwritten there."""
    return symbol[:at] + text + (symbol[at + len(text) :] if keep_tail else "")


@settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(alphabet=_ALPHABET, max_size=80).map(lambda s: "_Z" + s),
        st.builds(
            _mutate,
            st.sampled_from([g[0] for g in GOLDEN]),
            st.integers(0, 200),
            st.text(_ALPHABET, max_size=6),
            st.booleans(),
        ),
    )
)
def test_garbage_only_raises_demangle_error(symbol: str) -> None:
    try:
        d = demangle(symbol)
    except DemangleError:
        return
    str(d)  # whatever demangles also spells


# --- real kernels, compiled here -------------------------------------------------------------------------------------

CXXFILT = shutil.which("c++filt")

KERNELS_CU = r"""
#include <cstdint>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace ns {
struct Args { int n; float alpha; };
template <class T> struct Wrap { T x; };
enum class Mode : int { A = 1, B = 2 };
namespace inner { template <class T, int N> struct Vec { T v[N]; }; }
struct T0 {}; struct T1 {}; struct T2 {}; struct T3 {}; struct T4 {}; struct T5 {}; struct T6 {}; struct T7 {};
struct T8 {}; struct T9 {}; struct T10 {}; struct T11 {}; struct T12 {};
}  // namespace ns
namespace cute {
template <class T, int R> struct Tensor { T* p; };
template <int N> struct C {};
template <class... Ts> struct tuple {};
}  // namespace cute
namespace { __global__ void anon_k(int* p) {} }
void* keep_anon = (void*)anon_k;

__global__ void axpy_k(float a, const float* x, float* y, int n) {}
__global__ void nothing_k() {}
__global__ void restrict_k(const float* __restrict__ a, float* __restrict__* pp, const int* __restrict__ const* q) {}
__global__ void half_k(__half* h, const __nv_bfloat16* b, __half2 h2, __nv_bfloat162 b2, __half h1) {}
__global__ void tma_k(const __grid_constant__ CUtensorMap m, float** pp, const float* const* cpp) {}
__global__ void ints_k(char a, signed char b, unsigned char c, short d, unsigned short e, long f, unsigned long g,
                       long long h, unsigned long long i, bool j, double k, int8_t l, uint64_t m, wchar_t w) {}
__global__ void struct_k(ns::Args args, ns::Args* pargs, ns::inner::Vec<float, 4> v, ns::Wrap<ns::Args> w) {}
__global__ void volatile_k(volatile int* v, const volatile unsigned* cv, volatile float* const* vp) {}
__global__ void fnptr_k(void (*cb)(int), int (*tbl)[4], float (*g)(const float*, float*)) {}
__global__ void subst_k(ns::Args a, ns::Args* b, const ns::Args* c, const ns::Args* const* d, ns::Wrap<ns::Args>* e,
                        ns::Wrap<ns::Wrap<ns::Args>> f, ns::inner::Vec<ns::Args, 2>* g) {}
__global__ void many_k(ns::T0*, ns::T1*, ns::T2*, ns::T3*, ns::T4*, ns::T5*, ns::T6*, ns::T7*, ns::T8*, ns::T9*,
                       ns::T10*, ns::T11*, ns::T12*, ns::T0*, ns::T12*, const ns::T11*, ns::T9, ns::T10**) {}

template <class T, int N> __global__ void tk(const T* __restrict__ a, T* b, T c) {}
template __global__ void tk<float, 4>(const float*, float*, float);
template __global__ void tk<__half, -3>(const __half*, __half*, __half);
template __global__ void tk<double, 0>(const double*, double*, double);
namespace ns {
template <class T> __global__ void gemm(const T* a, const T* b, T* c, Args args, inner::Vec<T, 4> v) {}
template __global__ void gemm<__nv_bfloat16>(const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, Args,
                                             inner::Vec<__nv_bfloat16, 4>);
template __global__ void gemm<float>(const float*, const float*, float*, Args, inner::Vec<float, 4>);
namespace detail { template <class T, class U> __global__ void cvt(const T* in, U* out, Wrap<T> t, Wrap<U> u) {} }
template __global__ void detail::cvt<float, __half>(const float*, __half*, Wrap<float>, Wrap<__half>);
}  // namespace ns
template <class... Ts> __global__ void vk(Ts... xs) {}
template __global__ void vk<int, float, const int*>(int, float, const int*);
template __global__ void vk<>();
template <class... Ts> __global__ void vptr_k(const Ts*... xs) {}
template __global__ void vptr_k<float, __half>(const float*, const __half*);
template <unsigned U, bool B, long L, unsigned long long Q, char C> __global__ void lk() {}
template __global__ void lk<16u, true, -5l, 7ull, 'a'>();
template <ns::Mode M, short S, unsigned char UC> __global__ void enum_k(int x) {}
template __global__ void enum_k<ns::Mode::B, -2, 200>(int);
template <class T> __global__ void typeonly_k(int x) {}
template __global__ void typeonly_k<float&>(int);
template __global__ void typeonly_k<const int&&>(int);
template __global__ void typeonly_k<int[16]>(int);
template __global__ void typeonly_k<float (*)(int)>(int);
template __global__ void typeonly_k<decltype(nullptr)>(int);
template __global__ void typeonly_k<ns::Wrap<ns::Wrap<int>>>(int);
template __global__ void typeonly_k<cute::Tensor<float, 4>>(int);
template __global__ void typeonly_k<const volatile int* const>(int);
template <class T> __global__ void ptr_k(T* a, T** b, const T* c, T* const* d, ns::Wrap<T> w, ns::Wrap<T*> wp) {}
template __global__ void ptr_k<ns::inner::Vec<__half, 8>>(ns::inner::Vec<__half, 8>*, ns::inner::Vec<__half, 8>**,
    const ns::inner::Vec<__half, 8>*, ns::inner::Vec<__half, 8>* const*, ns::Wrap<ns::inner::Vec<__half, 8>>,
    ns::Wrap<ns::inner::Vec<__half, 8>*>);
template <class A, class B> __global__ void pair_k(A a, B b, A* pa, B* pb, ns::Wrap<A> wa, ns::Wrap<B> wb) {}
template __global__ void pair_k<ns::Args, cute::Tensor<float, 2>>(ns::Args, cute::Tensor<float, 2>, ns::Args*,
    cute::Tensor<float, 2>*, ns::Wrap<ns::Args>, ns::Wrap<cute::Tensor<float, 2>>);
template <class T> __global__ void tuple_k(cute::tuple<T, cute::C<1>, cute::tuple<T, cute::C<2>>> t, T* p) {}
template __global__ void tuple_k<float>(cute::tuple<float, cute::C<1>, cute::tuple<float, cute::C<2>>>, float*);
template <class T, int N> __global__ void arr_k(ns::inner::Vec<T, N>* v, T (*rows)[N]) {}
template __global__ void arr_k<int, 8>(ns::inner::Vec<int, 8>*, int (*)[8]);

extern "C" __global__ void c_k(const float* x, float* y, int n) {}
extern "C" __global__ void c_tma(const __grid_constant__ CUtensorMap m, __half* h, ns::Args a) {}
extern "C" __global__ void c_void() {}
template <int I, class T> __global__ void __kp_probe() {}
template __global__ void __kp_probe<0, decltype(c_k)>();
template __global__ void __kp_probe<1, decltype(c_tma)>();
template __global__ void __kp_probe<2, decltype(c_void)>();
"""


def _function_symbols(elf: bytes) -> list[str]:
    """Names of the STT_FUNC symbols of a 64-bit little-endian ELF (a cubin), from its .symtab."""
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != 2:  # SHT_SYMTAB
            continue
        strtab = sections[link][4]
        for entry in range(offset, offset + size, entsize):
            name, info = struct.unpack_from("<IB", elf, entry)
            if info & 0xF == 2:  # STT_FUNC
                names.append(elf[strtab + name : elf.index(b"\0", strtab + name)].decode())
    return names


@pytest.fixture(scope="module")
def kernel_symbols(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    if NVCC is None:
        pytest.skip("nvcc not found")
    work = tmp_path_factory.mktemp("demangle")
    (work / "kernels.cu").write_text(KERNELS_CU)
    cmd = [NVCC, "-cubin", "-arch=sm_90a", "-w", "-o", str(work / "kernels.cubin"), str(work / "kernels.cu")]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        pytest.fail(f"nvcc failed:\n{result.stderr}")
    return _function_symbols((work / "kernels.cubin").read_bytes())


@pytest.mark.skipif(CXXFILT is None, reason="c++filt not found")
def test_every_nvcc_kernel_symbol_agrees_with_cxxfilt(kernel_symbols: list[str]) -> None:
    mangled = [s for s in kernel_symbols if is_mangled(s)]
    assert len(mangled) >= 35 and {"c_k", "c_tma", "c_void"} <= set(kernel_symbols)
    assert CXXFILT is not None
    out = subprocess.run([CXXFILT], input="\n".join(mangled), capture_output=True, text=True, check=True).stdout
    wrong = [(s, str(demangle(s)), f) for s, f in zip(mangled, out.splitlines(), strict=True) if not _agrees(s, f)]
    assert not wrong, "\n".join(f"{s}\n  ours:     {o}\n  c++filt:  {f}" for s, o, f in wrong)


def test_probe_kernels_give_the_extern_c_parameter_types(kernel_symbols: list[str]) -> None:
    probes = {}
    for symbol in kernel_symbols:
        if symbol.startswith("_Z10__kp_probe"):
            d = demangle(symbol)
            index, fn = d.template_args
            assert isinstance(index, Literal) and isinstance(fn, FunctionType) and fn.ret == VOID and d.params == ()
            probes[index.value] = fn.params
    assert probes == {
        0: (PointerTo(Qualified(FLOAT, const=True)), PointerTo(FLOAT), INT),
        1: (Named("CUtensorMap_st"), PointerTo(Named("__half")), Named("ns::Args")),
        2: (),
    }
